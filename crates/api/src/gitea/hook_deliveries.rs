//! A hook's deliveries, for its admins: the last attempts with what was
//! sent and what came back (`GET .../hooks/{id}/deliveries`, shaped as
//! GitHub's delivery objects), one sent again
//! (`POST .../hooks/{id}/deliveries/{delivery}/attempts`), and Gitea's
//! test delivery (`POST .../hooks/{id}/tests`: a push of the default
//! branch). A receiver's answer is shown to no one else.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::hooks::{read, target_of};
use super::issues::path_id;
use super::objects::Base;
use super::payloads::{self, RefChange};
use super::shape::Shaper;
use crate::ApiState;
use vole_http::repo_access::Administer;
use vole_http::{AppError, RepoAccess};
use vole_webhooks::history::Attempt;

/// One attempt as the API shows it.
pub fn shown(attempt: &Attempt) -> Value {
    let headers = |pairs: &[(String, String)]| -> Value {
        pairs
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    json!({
        "id": attempt.delivery,
        "guid": attempt.delivery,
        "event": attempt.event_name,
        "attempt": attempt.attempt,
        "redelivery": attempt.redelivery,
        "delivered_at": vole_stdx::time::nanos_to_seconds(attempt.time_ns),
        "duration": attempt.duration_ms as f64 / 1000.0,
        "status": attempt.error.clone().unwrap_or_else(|| "OK".into()),
        "status_code": attempt.status.unwrap_or(0),
        "delivered": attempt.delivered(),
        "url": attempt.url,
        "request": { "headers": headers(&attempt.request_headers), "payload": attempt.request_body },
        "response": { "headers": headers(&attempt.response_headers), "payload": attempt.response_body },
    })
}

/// `GET /repos/{o}/{r}/hooks/{id}/deliveries`: newest first.
pub async fn list(
    State(app): State<Arc<ApiState>>,
    RepoAccess { repo, .. }: RepoAccess<Administer>,
    Path((_, _, id)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let id = path_id(&id, "hook")?;
    read(&app, &repo, move |app, repo| {
        app.meta.hook(repo.incarnation_id(), id)
    })
    .await?;
    let shown: Vec<Value> = app
        .webhooks
        .queue()
        .history(id)
        .iter()
        .map(|a| shown(a))
        .collect();
    Ok(Json(shown).into_response())
}

/// `POST /repos/{o}/{r}/hooks/{id}/deliveries/{delivery}/attempts`: the
/// delivery sent again now, with its id; 200 with the attempt.
pub async fn redeliver(
    State(app): State<Arc<ApiState>>,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Administer>,
    Path((_, _, id, delivery)): Path<(String, String, String, String)>,
) -> Result<Response, AppError> {
    let id = path_id(&id, "hook")?;
    let attempt = send_again(&app, &principal, &repo, (id, &delivery)).await?;
    Ok(Json(shown(&attempt)).into_response())
}

/// Delivery `delivery` of hook `id` of `repo` sent again now, by
/// `principal` (who may administer it): the API's and the settings
/// page's one path.
pub async fn send_again(
    app: &Arc<ApiState>,
    principal: &vole_access::Principal,
    repo: &vole_access::ResolvedRepo,
    (id, delivery): (u64, &str),
) -> Result<Attempt, AppError> {
    app.quotas.meta_write(principal)?;
    let hook = read(app, repo, move |app, repo| {
        app.meta.hook(repo.incarnation_id(), id)
    })
    .await?;
    let Some(past) = app
        .webhooks
        .queue()
        .history(id)
        .into_iter()
        .find(|a| a.delivery == delivery)
    else {
        return Err(AppError::not_found(format!(
            "hook {id} has no delivery {delivery} among its last ones"
        )));
    };
    // The event's payload when it is still kept; else what was sent.
    let payload = match app.webhooks.queue().event(past.event) {
        Some(event) => event.payload.to_string(),
        None if hook.content_type == vole_meta::webhooks::HookContent::Json
            && !past.request_cut =>
        {
            past.request_body.clone()
        }
        None => {
            return Err(AppError::new(
                StatusCode::GONE,
                "this delivery's event is no longer kept, and its history holds only part of its body (or a form's): it cannot be sent again",
            ));
        }
    };
    Ok(app
        .webhooks
        .send_now(
            &target_of(&hook),
            (&past.event_name, &payload),
            (past.event, &past.delivery),
        )
        .await)
}

/// `POST /repos/{o}/{r}/hooks/{id}/tests`: a push of the default
/// branch's newest commits sent to the hook now; 204 (the attempt is in
/// its deliveries).
pub async fn test(
    State(app): State<Arc<ApiState>>,
    base: Base,
    RepoAccess {
        repo, principal, ..
    }: RepoAccess<Administer>,
    Path((_, _, id)): Path<(String, String, String)>,
) -> Result<Response, AppError> {
    let id = path_id(&id, "hook")?;
    app.quotas.meta_write(&principal)?;
    let (hook, payload) = read(&app, &repo, move |app, repo| {
        let hook = app.meta.hook(repo.incarnation_id(), id)?;
        let path = app.repos.path(repo);
        let branch = vole_git::repos::head_branch(&path).unwrap_or_else(|| "main".into());
        let ref_name = format!("refs/heads/{branch}");
        let bounds = vole_git::Bounds {
            max_output: 256,
            deadline: std::time::Duration::from_secs(10),
        };
        let head = app
            .control
            .git
            .run_bounded(&path, &["rev-parse", "--verify", "-q", &ref_name], bounds)
            .ok()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
            .filter(|id| !id.is_empty());
        // Seen as the feed sees it: no private field of anyone.
        let anonymous = vole_access::Principal::Anonymous;
        let shaper = Shaper::new(app, base, &anonymous);
        let change = RefChange {
            ref_name: &ref_name,
            old: None,
            new: head.as_deref(),
            pusher: principal.name(),
        };
        Ok((hook, payloads::push(&shaper, repo, &change).to_string()))
    })
    .await?;
    let target = target_of(&hook);
    let delivery = target.delivery_id(u64::MAX - vole_log::now_ns() as u64);
    app.webhooks
        .send_now(&target, ("push", &payload), (0, &delivery))
        .await;
    Ok(StatusCode::NO_CONTENT.into_response())
}
