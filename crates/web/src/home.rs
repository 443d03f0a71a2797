//! `/`: every repo the visitor may read, filtered by a name substring, a
//! page at a time.

use super::*;

pub(super) struct RepoRow {
    name: String,
    private: bool,
    description: String,
    last_push: String,
}

#[derive(Template)]
#[template(path = "home.html")]
pub(super) struct HomePage {
    query: String,
    query_encoded: String,
    repos: Vec<RepoRow>,
    prev_page: Option<usize>,
    next_page: Option<usize>,
}

/// `GET /?q=&page=`: every repo, filtered by a name substring.
pub async fn home(
    State(app): State<Arc<WebState>>,
    axum::extract::Extension(principal): axum::extract::Extension<Principal>,
    Query(query): Query<HashMap<String, String>>,
    WebPage(page): WebPage<PER_PAGE>,
) -> Result<Response, AppError> {
    let filter = query
        .get("q")
        .map(|q| q.trim().to_string())
        .unwrap_or_default();
    let needle = filter.to_lowercase();
    let matching: Vec<_> = app
        .repos
        .list()
        .into_iter()
        // `list` yields only real directories inside `data/repos` (never a
        // symlink), so the listing rule is the resolver's whole rule here,
        // without a realpath per listed repo.
        .filter(|info| app.access.may_list(&principal, &info.name))
        .filter(|info| info.name.to_string().to_lowercase().contains(&needle))
        .collect();
    let total = matching.len();
    let repos = page
        .slice(matching)
        .map(|info| {
            let name = info.name.to_string();
            let last_push = app
                .recorder
                .activity(&name, Pagination::first(1))
                .0
                .first()
                .map(|entry| vole_stdx::time::nanos_to_seconds(entry.ref_move.time_ns))
                .unwrap_or_default();
            RepoRow {
                private: app.access.is_private(&info.name),
                name,
                description: info.description,
                last_push,
            }
        })
        .collect();
    render(HomePage {
        query_encoded: percent_encoding::utf8_percent_encode(
            &filter,
            percent_encoding::NON_ALPHANUMERIC,
        )
        .to_string(),
        query: filter,
        repos,
        prev_page: page.prev(),
        next_page: page
            .next()
            .filter(|_| page.offset() + page.per_page() < total),
    })
}
