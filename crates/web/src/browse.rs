//! The repo home and tree views (the blob and raw views are `blob.rs`'s,
//! what a revision and path name `resolve.rs`'s, the listing's last
//! commits `listing.rs`'s).

use super::listing::annotate;
use super::resolve::{resolve, resolve_path};
use super::*;
use vole_access::ResolvedRepo;

use super::last_commit;

/// Entries of a tree listed at most (a tree of a million entries is a
/// page of this many; the rest are reached by path).
pub(super) const MAX_LISTED: usize = 5000;

/// Branches and tags listed in a page's ref menu; the branches and tags
/// pages list them all, a page at a time.
pub(super) const REFS_IN_MENU: usize = 50;

pub struct Entry {
    pub(super) kind: &'static str,
    pub(super) name: String,
    pub(super) href: String,
    pub(super) note: &'static str,
    /// A file's size, for people ("1.2 KiB"); empty for the rest.
    pub(super) size: String,
    pub(super) last: Last,
}

/// The last commit that touched an entry, as the listing shows it.
pub enum Last {
    /// Not looked for (the page shows no such column).
    Unknown,
    Commit(last_commit::Touch),
    /// Not among the commits the walk looked at.
    Older(usize),
}

/// What every page inside a repo shows: the revision, its refs, its
/// latest commit, and (for trees) the listing.
pub struct View {
    pub(super) rev: String,
    pub(super) rev_label: String,
    /// The first [`REFS_IN_MENU`] branches and tags (the menu on every
    /// page), and how many there are.
    pub(super) branches: Vec<String>,
    pub(super) tags: Vec<String>,
    pub(super) branch_count: usize,
    pub(super) tag_count: usize,
    pub(super) commit_id: String,
    pub(super) commit_short: String,
    pub(super) commit_summary: String,
    pub(super) commit_author: String,
    pub(super) commit_time: String,
    pub(super) entries: Vec<Entry>,
}

#[derive(Template)]
#[template(path = "repo.html")]
pub(super) struct RepoPage {
    repo: String,
    rev: String,
    description: String,
    clone_url: String,
    default_branch: String,
    view: Option<View>,
    readme: Option<String>,
}

#[derive(Template)]
#[template(path = "tree.html")]
pub(super) struct TreePage {
    repo: String,
    rev: String,
    repo_name: String,
    path: String,
    view: View,
    crumbs: Vec<Crumb>,
}

pub(super) fn clone_url(app: &WebState, headers: &HeaderMap, name: &RepoName) -> String {
    if let Some(public) = &app.config.public_url {
        return format!("{public}/{name}.git");
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            h.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        })
        .map(str::to_string)
        .unwrap_or_else(|| app.config.listen.to_string());
    format!("http://{host}/{name}.git")
}

/// `GET /{owner}/{repo}`: clone URL, refs, latest commit, root listing,
/// README; or how to push to an empty repo.
pub async fn repo_home(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let description = app.repos.description(&name);
    let resolved = resolve(&app, &name, None, Vec::new(), true).await?;
    let (view, readme) = match resolved {
        None => (None, None),
        Some(mut resolved) => {
            annotate(&app, &name, &mut resolved).await;
            // Markdown and sanitizing are CPU work on up to 512 KiB: off
            // the async workers (which also carry the hooks' requests).
            let readme = match resolved.readme {
                Some((file, bytes)) => {
                    let (repo, rev) = (name.to_string(), resolved.view.rev.clone());
                    Some(
                        vole_http::spawn_blocking(move || {
                            render_readme(&repo, &rev, &file, &bytes)
                        })
                        .await
                        .map_err(|e| AppError::internal("README rendering failed", e))?,
                    )
                }
                None => None,
            };
            (Some(resolved.view), readme)
        }
    };
    // An empty repo's HEAD still names the branch a first push should
    // bring (the server's default, or the one the settings chose).
    let head = vole_git::repos::head_branch(&app.repos.path(&name))
        .unwrap_or_else(|| app.config.default_branch.clone());
    render(RepoPage {
        rev: view
            .as_ref()
            .map_or_else(|| head.clone(), |v| v.rev.clone()),
        repo: name.to_string(),
        description,
        clone_url: clone_url(&app, &headers, &name),
        default_branch: head,
        view,
        readme,
    })
}

/// `GET /{owner}/{repo}/-/tree/{rev}`: the root of a revision.
pub async fn tree_root(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, rev)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    tree_page(app, name, rev, String::new()).await
}

/// `GET /{owner}/{repo}/-/tree/{rev}/{*path}`.
pub async fn tree(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, rev, path)): Path<(String, String, String, String)>,
) -> Result<Response, AppError> {
    tree_page(app, name, rev, path).await
}

pub(super) async fn tree_page(
    app: Arc<WebState>,
    name: ResolvedRepo,
    rev: String,
    path: String,
) -> Result<Response, AppError> {
    let (name, segments, mut resolved) = resolve_path(&app, name, &rev, &path).await?;
    match resolved.node {
        Node::Tree(_) => annotate(&app, &name, &mut resolved).await,
        Node::Blob { .. } => {
            let to = format!(
                "/{name}/-/blob/{}/{}",
                rev_path(&rev),
                encode_path(&segments)
            );
            return Ok(redirect(&to));
        }
        Node::Missing => {
            return Err(AppError::not_found(format!(
                "There is no directory {path} in {name} at {rev}."
            )));
        }
    }
    render(TreePage {
        rev: resolved.view.rev.clone(),
        repo: name.to_string(),
        repo_name: name.name().to_string(),
        crumbs: crumbs(&name.to_string(), &resolved.view.rev, &segments),
        path: if path.is_empty() { "/".into() } else { path },
        view: resolved.view,
    })
}
