//! `/-/new`: the "New repository" form. A signed-in person makes a repo
//! under their own name (a server admin under any owner), described and
//! public or private, through the same creation the API's
//! `POST /api/v1/user/repos` takes (`vole_api::repos::create_repo`: the name
//! rules, `access`, the per-user quota, `vole_control`).

use axum::extract::{Extension, Request};
use serde::Deserialize;
use vole_api::repos::CreateRepo;

use super::*;
use crate::forms::{checked_form, client_of, session_user};
use crate::sign_in::{see_other, to_sign_in};

const PATH: &str = "/-/new";

#[derive(Template)]
#[template(path = "new_repo.html")]
struct NewRepoPage {
    csrf: String,
    owner: String,
    /// A server admin may make a repo under any owner; others see their
    /// own name, not a field they may not change.
    any_owner: bool,
    name: String,
    description: String,
    private: bool,
    error: Option<String>,
}

/// `GET /-/new`.
pub async fn new_repo_page(
    Extension(principal): Extension<Principal>,
) -> Result<Response, AppError> {
    let Some((user, csrf)) = session_user() else {
        return Ok(to_sign_in(PATH));
    };
    render(NewRepoPage {
        csrf,
        owner: user,
        any_owner: principal.is_server_admin(),
        name: String::new(),
        description: String::new(),
        private: false,
        error: None,
    })
}

#[derive(Debug, Deserialize)]
struct NewRepoForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    owner: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    description: String,
    /// A checkbox: present when ticked.
    #[serde(default)]
    private: Option<String>,
}

/// `POST /-/new`: creates the repo and goes to it.
pub async fn create_repo(
    State(app): State<Arc<WebState>>,
    Extension(principal): Extension<Principal>,
    request: Request,
) -> Result<Response, AppError> {
    let client = client_of(&request);
    let Some((user, csrf, form)) = checked_form::<NewRepoForm>(&app, request, |f| &f.csrf).await?
    else {
        return Ok(to_sign_in(PATH));
    };
    let owner = match form.owner.trim() {
        "" => user,
        owner => owner.to_string(),
    };
    let description = form.description.trim().to_string();
    let create = CreateRepo {
        name: form.name.trim().to_string(),
        owner: Some(owner.clone()),
        description: (!description.is_empty()).then(|| description.clone()),
        private: form.private.is_some(),
    };
    match vole_api::repos::create_repo(&app.api, &principal, create, &client).await {
        Ok(name) => Ok(see_other(&format!("/{name}"), &[])),
        Err(refused) if refused.status().is_client_error() => {
            let mut response = render(NewRepoPage {
                csrf,
                owner,
                any_owner: principal.is_server_admin(),
                name: form.name,
                description,
                private: form.private.is_some(),
                error: Some(refused.message().to_string()),
            })?;
            *response.status_mut() = refused.status();
            Ok(response)
        }
        Err(refused) => Err(refused),
    }
}
