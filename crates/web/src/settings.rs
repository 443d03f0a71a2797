//! `/{owner}/{repo}/-/settings`: a repo's settings page, for its admins
//! (every route takes `RepoAccess<Administer>`: a reader's forged POST is
//! a 403 before any form is read). Three forms, each written through the
//! API's own path (`vole_api::meta::write_settings`, `write_acl`,
//! `vole_api::repos::delete_repo`: quotas, `access`, the audit log):
//! - general: description, default branch (HEAD moves, recorded in the
//!   ref log), protected branches, the site's ref and directory;
//! - access: visibility, members and their roles (add, change, remove);
//! - webhooks: listed, one added (its URL checked by the server's guard)
//!   or deleted, through the API's own path (`vole_api::gitea::hooks`);
//! - delete: the repo's name typed to confirm; the repo goes to the trash.
//!
//! Each form carries the version it was shown; a version that moved since
//! is refused (409) and the page shows the new state.

use axum::extract::Request;
use serde::Deserialize;
use vole_access::{Principal, ResolvedRepo};
use vole_http::RepoAccess;
use vole_http::repo_access::Administer;
use vole_meta::entity::{Member, MergeMethod, MergeSettings, Role, SiteSettings, Visibility};
use vole_meta::{AclPut, SettingsPut};

use super::*;
use crate::forms::{checked_form, client_of, session_user};
use crate::sign_in::{see_other, to_sign_in};

struct MemberRow {
    name: String,
    role: &'static str,
}

/// Most branches the default-branch list offers; a repo with more has the
/// name typed.
const MAX_BRANCH_CHOICES: usize = 200;

#[derive(Template)]
#[template(path = "settings.html")]
struct SettingsPage {
    repo: String,
    csrf: String,
    rev: String,
    description: String,
    default_branch: String,
    branches: Vec<String>,
    protected: String,
    protected_admins_only: bool,
    site_ref: String,
    site_dir: String,
    merge: MergeSettings,
    settings_version: u64,
    private: bool,
    owner: String,
    members: Vec<MemberRow>,
    acl_version: u64,
    hooks: Vec<crate::settings_hooks::HookRow>,
    hook_events: &'static [&'static str],
    saved: Option<&'static str>,
    error: Option<String>,
}

impl MemberRow {
    fn has(&self, role: &str) -> bool {
        self.role == role
    }
}

impl SettingsPage {
    fn is_default(&self, branch: &str) -> bool {
        self.default_branch == branch
    }

    fn all_methods(&self) -> [MergeMethod; 3] {
        MergeMethod::ALL
    }

    fn offers(&self, method: &MergeMethod) -> bool {
        self.merge.methods.contains(method)
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Read => "read",
        Role::Write => "write",
        Role::Admin => "admin",
    }
}

fn parse_role(text: &str) -> Result<Role, AppError> {
    match text {
        "read" => Ok(Role::Read),
        "write" => Ok(Role::Write),
        "admin" => Ok(Role::Admin),
        other => Err(AppError::bad_request(format!(
            "role {other:?} is not one of read, write, admin"
        ))),
    }
}

pub(crate) fn settings_path(name: &ResolvedRepo) -> String {
    format!("/{name}/-/settings")
}

async fn page(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    csrf: String,
    saved: Option<&'static str>,
    error: Option<AppError>,
) -> Result<Response, AppError> {
    let settings = vole_api::meta::read_settings(&app.api, name)?;
    let acl = app.api.meta.acl(name)?;
    let private = app.access.visibility_of(name, &acl) == Visibility::Private;
    let path = app.repos.path(name);
    let incarnation = name.incarnation_id().to_string();
    let gix = app.gix.clone();
    let refs = blocking(move || {
        let git = read::open(&gix, &path, &incarnation)?;
        read::refs(&git)
    })
    .await?;
    // The default branch is chosen from a list of at most
    // MAX_BRANCH_CHOICES (past that, typed), which holds the current one
    // even before it has a commit (an unborn HEAD kept as it is).
    let mut branches = refs.branches;
    if branches.len() > MAX_BRANCH_CHOICES {
        branches.clear();
    } else if !branches.is_empty() && !branches.contains(&settings.default_branch) {
        branches.insert(0, settings.default_branch.clone());
    }
    let hooks = crate::settings_hooks::rows(app, name).await?;
    let status = error.as_ref().map_or(StatusCode::OK, AppError::status);
    let mut response = render(SettingsPage {
        repo: name.to_string(),
        csrf,
        rev: settings.default_branch.clone(),
        description: settings.description,
        default_branch: settings.default_branch,
        branches,
        protected: settings.protected_branches.join(" "),
        protected_admins_only: settings.protected_admins_only,
        site_ref: settings.site.ref_name,
        site_dir: settings.site.dir,
        merge: settings.merge,
        settings_version: settings.version,
        private,
        owner: acl.owner.unwrap_or_else(|| name.owner().to_string()),
        members: acl
            .members
            .into_iter()
            .map(|m| MemberRow {
                name: m.name,
                role: role_name(m.role),
            })
            .collect(),
        acl_version: acl.version,
        hooks,
        hook_events: vole_meta::webhooks::HOOK_EVENTS,
        saved,
        error: error.map(|e| e.message().to_string()),
    })?;
    *response.status_mut() = status;
    Ok(response)
}

/// A refusal shown on the page (a 4xx: the form again with its message);
/// anything else is the error page.
pub(crate) async fn answer(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    csrf: String,
    result: Result<&'static str, AppError>,
) -> Result<Response, AppError> {
    match result {
        Ok(saved) => Ok(see_other(
            &format!("{}?saved={saved}", settings_path(name)),
            &[],
        )),
        Err(refused) if refused.status().is_client_error() => {
            page(app, name, csrf, None, Some(refused)).await
        }
        Err(refused) => Err(refused),
    }
}

#[derive(Debug, Deserialize)]
pub struct Saved {
    saved: Option<String>,
}

/// `GET /{owner}/{repo}/-/settings`.
pub async fn settings_page(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Administer>,
    Query(saved): Query<Saved>,
) -> Result<Response, AppError> {
    let Some((_, csrf)) = session_user() else {
        return Ok(to_sign_in(&settings_path(&name)));
    };
    let saved = match saved.saved.as_deref() {
        Some("general") => Some("The settings are saved."),
        Some("access") => Some("Who may do what is saved."),
        Some("hooks") => Some("The webhooks are saved."),
        _ => None,
    };
    page(&app, &name, csrf, saved, None).await
}

#[derive(Debug, Deserialize)]
struct GeneralForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    version: u64,
    #[serde(default)]
    description: String,
    #[serde(default)]
    default_branch: String,
    #[serde(default)]
    protected: String,
    #[serde(default)]
    protected_admins_only: Option<String>,
    #[serde(default)]
    site_ref: String,
    #[serde(default)]
    site_dir: String,
    #[serde(default)]
    method_merge: Option<String>,
    #[serde(default, rename = "method_fast-forward-only")]
    method_fast_forward_only: Option<String>,
    #[serde(default)]
    method_squash: Option<String>,
    #[serde(default)]
    default_method: String,
}

impl GeneralForm {
    /// The merge methods ticked, and the default chosen; a form without
    /// them (from a page before they were on it) keeps `current`.
    fn merge(&self, current: MergeSettings) -> Result<MergeSettings, AppError> {
        if self.default_method.is_empty() {
            return Ok(current);
        }
        let ticked = [
            (MergeMethod::Merge, &self.method_merge),
            (MergeMethod::FastForwardOnly, &self.method_fast_forward_only),
            (MergeMethod::Squash, &self.method_squash),
        ];
        let methods = ticked
            .into_iter()
            .filter(|(_, on)| on.is_some())
            .map(|(m, _)| m)
            .collect();
        let default = MergeMethod::parse(&self.default_method).ok_or_else(|| {
            AppError::bad_request(format!(
                "default merge method {:?} is not one of merge, fast-forward-only, squash",
                self.default_method
            ))
        })?;
        Ok(MergeSettings { methods, default })
    }
}

/// `POST /{owner}/{repo}/-/settings`: the general settings.
pub async fn save_general(
    State(app): State<Arc<WebState>>,
    RepoAccess {
        repo: name,
        principal,
        ..
    }: RepoAccess<Administer>,
    request: Request,
) -> Result<Response, AppError> {
    let client = client_of(&request);
    let Some((_, csrf, form)) = checked_form::<GeneralForm>(&app, request, |f| &f.csrf).await?
    else {
        return Ok(to_sign_in(&settings_path(&name)));
    };
    let current = vole_api::meta::read_settings(&app.api, &name)?;
    let put = SettingsPut {
        version: form.version,
        description: form.description.trim().to_string(),
        default_branch: form.default_branch.trim().to_string(),
        protected_branches: form
            .protected
            .split_whitespace()
            .map(str::to_string)
            .collect(),
        protected_admins_only: form.protected_admins_only.is_some(),
        site: SiteSettings {
            ref_name: form.site_ref.trim().to_string(),
            dir: form.site_dir.trim().trim_matches('/').to_string(),
        },
        merge: form.merge(current.merge)?,
        // Not on the page: kept as they are.
        site_domains: current.site_domains,
    };
    let written =
        vole_api::meta::write_settings(&app.api, &principal, name.clone(), put, &client).await;
    answer(&app, &name, csrf, written.map(|_| "general")).await
}

#[derive(Debug, Deserialize)]
struct AccessForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    acl_version: u64,
    /// `visibility`, `add`, `role` or `remove`.
    #[serde(default)]
    action: String,
    #[serde(default)]
    visibility: String,
    #[serde(default)]
    member: String,
    #[serde(default)]
    role: String,
}

/// `POST /{owner}/{repo}/-/settings/access`: the visibility, or one
/// member added, given another role, or removed.
pub async fn save_access(
    State(app): State<Arc<WebState>>,
    RepoAccess {
        repo: name,
        principal,
        ..
    }: RepoAccess<Administer>,
    request: Request,
) -> Result<Response, AppError> {
    let client = client_of(&request);
    let Some((_, csrf, form)) = checked_form::<AccessForm>(&app, request, |f| &f.csrf).await?
    else {
        return Ok(to_sign_in(&settings_path(&name)));
    };
    let result = access_change(&app, &principal, &name, form, &client).await;
    answer(&app, &name, csrf, result.map(|()| "access")).await
}

async fn access_change(
    app: &Arc<WebState>,
    principal: &Principal,
    name: &ResolvedRepo,
    form: AccessForm,
    client: &str,
) -> Result<(), AppError> {
    let acl = app.api.meta.acl(name)?;
    let mut put = AclPut {
        version: form.acl_version,
        visibility: app.access.visibility_of(name, &acl),
        owner: None,
        members: acl.members,
    };
    let member = form.member.trim().to_string();
    match form.action.as_str() {
        "visibility" => {
            put.visibility = match form.visibility.as_str() {
                "public" => Visibility::Public,
                "private" => Visibility::Private,
                other => {
                    return Err(AppError::bad_request(format!(
                        "visibility {other:?} is not public or private"
                    )));
                }
            }
        }
        "add" | "role" => {
            let role = parse_role(&form.role)?;
            if member.is_empty() {
                return Err(AppError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Give the user name of the member.",
                ));
            }
            let users = app.accounts.clone();
            let lookup = member.clone();
            let user = vole_http::spawn_blocking(move || users.user(&lookup))
                .await
                .map_err(|e| AppError::internal("user lookup task failed", e))?
                .map_err(|e| AppError::unavailable("cannot look a user up", &e))?
                .ok_or_else(|| {
                    AppError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        format!("There is no user named {member:?}."),
                    )
                })?;
            put.members
                .retain(|m| !m.name.eq_ignore_ascii_case(&user.name));
            put.members.push(Member {
                name: user.name,
                role,
            });
        }
        "remove" => {
            let before = put.members.len();
            put.members
                .retain(|m| !m.name.eq_ignore_ascii_case(&member));
            if put.members.len() == before {
                return Err(AppError::not_found(format!(
                    "{member:?} is not a member of {name}."
                )));
            }
        }
        other => {
            return Err(AppError::bad_request(format!(
                "{other:?} is not a change this form makes"
            )));
        }
    }
    vole_api::meta::write_acl(&app.api, principal, name.clone(), put, client).await?;
    Ok(())
}

#[derive(Debug, Deserialize)]
struct DeleteForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    confirm: String,
}

/// `POST /{owner}/{repo}/-/settings/delete`: with the repo's full name
/// typed, the repo goes to the trash (an operator can restore it).
pub async fn delete_repo(
    State(app): State<Arc<WebState>>,
    RepoAccess {
        repo: name,
        principal,
        ..
    }: RepoAccess<Administer>,
    request: Request,
) -> Result<Response, AppError> {
    let client = client_of(&request);
    let Some((_, csrf, form)) = checked_form::<DeleteForm>(&app, request, |f| &f.csrf).await?
    else {
        return Ok(to_sign_in(&settings_path(&name)));
    };
    if form.confirm.trim() != name.to_string() {
        let refused = AppError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("Type {name} to confirm the deletion; nothing was deleted."),
        );
        return page(&app, &name, csrf, None, Some(refused)).await;
    }
    vole_api::repos::delete_repo(&app.api, &principal, name, &client).await?;
    Ok(see_other("/", &[]))
}
