//! The settings page's webhooks: each hook's row (its URL, events, whether
//! it is failing and why, its last deliveries with what was sent and what
//! came back) and the form that adds one, deletes one or sends a delivery
//! again, each through the API's own path (`vole_api::gitea::hooks`,
//! `hook_deliveries`: its quotas, its guard).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::Response;
use serde::Deserialize;
use vole_access::ResolvedRepo;
use vole_http::repo_access::Administer;
use vole_http::{AppError, RepoAccess};

use crate::WebState;
use crate::forms::checked_form;
use crate::settings::{answer, settings_path};
use crate::sign_in::to_sign_in;

/// One webhook as the page lists it (never its secret), with how its
/// deliveries go and its last ones.
pub(crate) struct HookRow {
    pub(crate) id: u64,
    pub(crate) url: String,
    pub(crate) events: String,
    pub(crate) active: bool,
    /// Why it is failing, when it is.
    pub(crate) failing: Option<String>,
    pub(crate) deliveries: Vec<DeliveryRow>,
}

/// One delivery attempt as the page shows it.
pub(crate) struct DeliveryRow {
    pub(crate) delivery: String,
    pub(crate) when: String,
    pub(crate) event: String,
    pub(crate) attempt: u32,
    /// The status code, or why there was none.
    pub(crate) outcome: String,
    pub(crate) ok: bool,
    pub(crate) duration_ms: u64,
    pub(crate) request: String,
    pub(crate) response: String,
}

/// Deliveries a hook's row shows.
const SHOWN_DELIVERIES: usize = 10;

impl DeliveryRow {
    fn of(a: &vole_webhooks::history::Attempt) -> DeliveryRow {
        let lines = |headers: &[(String, String)]| {
            headers
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        DeliveryRow {
            delivery: a.delivery.clone(),
            when: vole_stdx::time::nanos_to_seconds(a.time_ns),
            event: a.event_name.clone(),
            attempt: a.attempt,
            outcome: match (a.status, &a.error) {
                (Some(code), _) if a.delivered() => code.to_string(),
                (_, Some(why)) => why.clone(),
                (Some(code), None) => code.to_string(),
                (None, None) => "no answer".into(),
            },
            ok: a.delivered(),
            duration_ms: a.duration_ms,
            request: format!(
                "POST {}\n{}\n\n{}",
                a.url,
                lines(&a.request_headers),
                a.request_body
            ),
            response: format!("{}\n\n{}", lines(&a.response_headers), a.response_body),
        }
    }
}

/// Each hook of `name` as the page lists it.
pub(crate) async fn rows(app: &WebState, name: &ResolvedRepo) -> Result<Vec<HookRow>, AppError> {
    Ok(vole_api::gitea::hooks::listed(&app.api, name)
        .await?
        .into_iter()
        .map(|h| {
            let status = app.api.webhooks.status(h.serial).unwrap_or_default();
            HookRow {
                id: h.serial,
                failing: status
                    .failing
                    .then(|| status.last_error.unwrap_or_else(|| "no 2xx".into())),
                deliveries: app
                    .api
                    .webhooks
                    .queue()
                    .history(h.serial)
                    .iter()
                    .take(SHOWN_DELIVERIES)
                    .map(|a| DeliveryRow::of(a))
                    .collect(),
                url: h.url,
                events: h.events.join(", "),
                active: h.active,
            }
        })
        .collect())
}

/// The webhooks form: one added (`add`) or deleted (`delete`, `id`), or
/// a delivery sent again (`redeliver`, `id`, `delivery`).
#[derive(Debug, Deserialize)]
struct HooksForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    id: u64,
    #[serde(default)]
    url: String,
    #[serde(default)]
    secret: String,
    #[serde(default)]
    content_type: String,
    #[serde(default)]
    branch_filter: String,
    /// The delivery `redeliver` sends again.
    #[serde(default)]
    delivery: String,
    /// Each event's checkbox (`event_push=on`, ...).
    #[serde(flatten)]
    rest: std::collections::HashMap<String, String>,
}

/// `POST /{owner}/{repo}/-/settings/hooks`: a webhook added or deleted,
/// or one of its deliveries sent again.
pub async fn save_hooks(
    State(app): State<Arc<WebState>>,
    RepoAccess {
        repo: name,
        principal,
        ..
    }: RepoAccess<Administer>,
    request: Request,
) -> Result<Response, AppError> {
    let Some((_, csrf, form)) = checked_form::<HooksForm>(&app, request, |f| &f.csrf).await? else {
        return Ok(to_sign_in(&settings_path(&name)));
    };
    let result = match form.action.as_str() {
        "add" => {
            let events: Vec<String> = vole_meta::webhooks::HOOK_EVENTS
                .iter()
                .filter(|e| {
                    form.rest
                        .get(&format!("event_{e}"))
                        .is_some_and(|v| v == "on")
                })
                .map(|e| e.to_string())
                .collect();
            let option = vole_api::gitea::hooks::HookOption::gitea(
                (form.url.trim(), &form.secret, &form.content_type),
                events,
                form.branch_filter.trim(),
            );
            vole_api::gitea::hooks::add(&app.api, &principal, &name, option)
                .await
                .map(drop)
        }
        "delete" => vole_api::gitea::hooks::remove(&app.api, &principal, &name, form.id).await,
        "redeliver" => vole_api::gitea::hook_deliveries::send_again(
            &app.api,
            &principal,
            &name,
            (form.id, &form.delivery),
        )
        .await
        .map(drop),
        other => Err(AppError::bad_request(format!(
            "{other:?} is not something the webhooks form does (add, delete, redeliver)"
        ))),
    };
    answer(&app, &name, csrf, result.map(|()| "hooks")).await
}
