//! Planning a request: from the repo's current site (its ref, directory
//! and root tree) and the request path to a [`Plan`] (a file, a redirect,
//! the site's 404, or hidden), cached per root tree.

use super::*;

impl SiteRequest<'_> {
    /// The answer from the warm cache, touching no git and no blocking
    /// thread when its blob is cached too; `None` when the plan is not
    /// remembered for the current versions.
    pub(super) async fn answer_warm(
        &self,
        app: &Arc<SitesState>,
    ) -> Option<Result<Response, AppError>> {
        if self.method != Method::GET && self.method != Method::HEAD {
            return Some(Err(read_only()));
        }
        if self.principal != &Principal::Anonymous {
            return None;
        }
        let warm = app.sites.warm_plan(self.key, Versions::now(app))?;
        Some(self.answer(app, &warm.plan, &warm.repo_path).await)
    }

    /// Resolves the request of a site domain against the repo's current
    /// site (cached per root tree), remembers the plan, answers. The route
    /// names no repo, so the site's own check decides here.
    pub(super) async fn resolve(
        &self,
        app: &Arc<SitesState>,
        repo: RepoName,
        path: &str,
        base: &str,
    ) -> Result<Response, AppError> {
        // A missing repo and one the visitor may not read take one path
        // and get one answer.
        let readable = app.access.exists(&repo)
            && app
                .access
                .check(self.principal, Action::ReadSite, &repo)
                .is_ok();
        self.plan_and_answer(app, repo, readable, path, base).await
    }

    /// [`SiteRequest::resolve`] for a repo the route's `RepoAccess` let
    /// through.
    pub(super) async fn resolve_readable(
        &self,
        app: &Arc<SitesState>,
        repo: RepoName,
        path: &str,
        base: &str,
    ) -> Result<Response, AppError> {
        self.plan_and_answer(app, repo, true, path, base).await
    }

    async fn plan_and_answer(
        &self,
        app: &Arc<SitesState>,
        repo: RepoName,
        readable: bool,
        path: &str,
        base: &str,
    ) -> Result<Response, AppError> {
        if self.method != Method::GET && self.method != Method::HEAD {
            return Err(read_only());
        }
        let Ok(site_path) = TreePath::parse(path) else {
            return Ok(plain_not_found(self.sandbox));
        };
        // Read before resolving: a push or a settings change during the
        // resolution leaves the remembered plan already out of date.
        let versions = Versions::now(app);
        let repo_path: Arc<std::path::Path> = app.repos.path(&repo).into();
        let plan = if readable {
            Self::site_plan(app, repo, site_path, path, base, versions, &repo_path).await?
        } else if self.sandbox {
            // Remembered like any plan: an ACL change moves the settings
            // generation, so the next request decides again.
            Arc::new(Plan::Hidden(format!("repository {repo} not found")))
        } else {
            // A domain's visitor never named the repo: its name stays out.
            Arc::new(Plan::Hidden("not found".into()))
        };
        // Only what the anonymous may read is remembered (see
        // `SiteRequest::principal`): a hidden repo, like a missing one, is
        // decided again on every request, on the same path.
        if self.principal == &Principal::Anonymous && readable {
            app.sites.remember(
                self.key,
                Warm {
                    versions,
                    repo_path: repo_path.clone(),
                    plan: plan.clone(),
                },
            );
        }
        self.answer(app, &plan, &repo_path).await
    }

    /// The plan for `site_path` in the repo's current site: from the plan
    /// cache when its root tree is known, else looked up in git (off the
    /// async workers) and cached by root tree.
    pub(super) async fn site_plan(
        app: &Arc<SitesState>,
        repo: RepoName,
        site_path: TreePath,
        path: &str,
        base: &str,
        versions: Versions,
        repo_path: &Arc<std::path::Path>,
    ) -> Result<Arc<Plan>, AppError> {
        let store = app.sites.store.clone();
        // The roots' key: the repo and its incarnation.
        let incarnation = app.meta.incarnation(&repo).ok().flatten();
        let repo_name = format!("{repo}#{}", incarnation.as_ref().map_or("", |i| i.id()));
        let source = app.meta.site(&repo);
        // Checked when the settings were written; read by the same rule in
        // case the ref was written by something else.
        let Ok(dir) = TreePath::parse(&source.dir).map(TreePath::into_segments) else {
            return Ok(Arc::new(Plan::NoSite(format!(
                "the site directory of {repo} is not a valid path"
            ))));
        };
        // The plan depends on the base (redirects) and the path; a base
        // holds no newline, so the pair is read back unambiguously.
        let request_key = format!("{base}\n{path}");
        let cached = store
            .cached_root(&repo_name, &source.ref_name, &dir, versions.refs)
            .flatten()
            .and_then(|root| {
                app.sites
                    .plans
                    .read()
                    .get(&(root, request_key.clone()))
                    .cloned()
            });
        if let Some(plan) = cached {
            return Ok(plan);
        }
        // Only here: a cached plan implies the repo exists.
        if !app.access.exists(&repo) {
            return Err(AppError::not_found(format!("repository {repo} not found")));
        }
        let base_owned = base.to_string();
        let ref_name = source.ref_name.clone();
        let lookup_path = repo_path.clone();
        let resolved = vole_http::spawn_blocking(move || {
            let source = (ref_name.as_str(), dir.as_slice());
            plan(
                &store,
                &repo_name,
                &lookup_path,
                source,
                &site_path,
                &base_owned,
                versions.refs,
            )
        })
        .await
        .map_err(|e| AppError::internal("site lookup panicked", e))?
        .map_err(|e| e.into_app_error("site lookup failed"))?;
        Ok(match resolved {
            None => Arc::new(Plan::NoSite(no_site_message(&repo, &source))),
            Some((root, plan)) => {
                let plan = Arc::new(plan);
                app.sites
                    .plans
                    .write()
                    .insert((root, request_key), plan.clone(), 1);
                plan
            }
        })
    }

    pub(super) async fn answer(
        &self,
        app: &Arc<SitesState>,
        plan: &Plan,
        repo_path: &Arc<std::path::Path>,
    ) -> Result<Response, AppError> {
        match plan {
            Plan::NoSite(message) | Plan::Hidden(message) => {
                Err(AppError::not_found(message.clone()))
            }
            Plan::Redirect(to) => Ok(moved(to)),
            Plan::NotFound => Ok(plain_not_found(self.sandbox)),
            Plan::File(head) => self.file_response(app, repo_path, head).await,
        }
    }
}

pub(super) fn read_only() -> AppError {
    AppError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "sites are read-only: use GET or HEAD",
    )
}

pub(super) fn no_site_message(repo: &RepoName, source: &vole_meta::entity::SiteSettings) -> String {
    let what = match (
        source.ref_name.strip_prefix("refs/heads/"),
        source.dir.is_empty(),
    ) {
        (Some(branch), true) => format!("a `{branch}` branch"),
        (Some(branch), false) => format!("a `{branch}` branch with a `{}` directory", source.dir),
        (None, _) => format!("`{}`", source.ref_name),
    };
    format!("{repo} has no site: push {what} to publish one")
}

/// The site's root tree and what it says about `path`; `None` when the repo
/// has no such ref or directory.
pub(super) fn plan(
    store: &SiteStore,
    repo_name: &str,
    repo_path: &std::path::Path,
    (ref_name, dir): (&str, &[String]),
    path: &TreePath,
    base: &str,
    generation: u64,
) -> Result<Option<(ObjectId, Plan)>, store::SiteError> {
    let Some(root) = store.root_tree(repo_name, repo_path, ref_name, dir, generation)? else {
        return Ok(None);
    };
    Ok(Some((root, plan_in(store, repo_path, root, path, base)?)))
}

pub(super) fn plan_in(
    store: &SiteStore,
    repo_path: &std::path::Path,
    root: ObjectId,
    path: &TreePath,
    base: &str,
) -> Result<Plan, store::SiteError> {
    let segments = path.segments();
    let found = match store.lookup(repo_path, root, segments)? {
        Lookup::File { .. } if path.trailing_slash() => None,
        Lookup::File { .. } if segments.last().is_some_and(|s| s == "index.html") => {
            let parent = &segments[..segments.len() - 1];
            let dir = if parent.is_empty() {
                String::new()
            } else {
                format!("{}/", vole_git::tree_path::encode_segments(parent))
            };
            return Ok(Plan::Redirect(format!("{base}{dir}")));
        }
        Lookup::File { id, size } => Some((id, size, segments.last().map_or("", |s| s))),
        Lookup::Dir(_) if !path.trailing_slash() => {
            return Ok(Plan::Redirect(format!(
                "{base}{}/",
                vole_git::tree_path::encode_segments(segments)
            )));
        }
        Lookup::Dir(dir) => match store.lookup(repo_path, dir, &["index.html".to_string()])? {
            Lookup::File { id, size } => Some((id, size, "index.html")),
            _ => None,
        },
        Lookup::Missing => None,
    };
    if let Some((id, size, name)) = found {
        return Ok(Plan::File(FileHead::new(id, size, name, StatusCode::OK)));
    }
    Ok(
        match store.lookup(repo_path, root, &["404.html".to_string()])? {
            Lookup::File { id, size } => {
                Plan::File(FileHead::new(id, size, "404.html", StatusCode::NOT_FOUND))
            }
            _ => Plan::NotFound,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bare repo whose `pages` branch holds `files`, made with git.
    fn site(files: &[(&str, &str)]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let bare = dir.path().join("site.git");
        let git = |cwd: &std::path::Path, args: &[&str]| {
            let out = std::process::Command::new("git")
                .current_dir(cwd)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        git(
            dir.path(),
            &["init", "-q", "-b", "pages", work.to_str().unwrap()],
        );
        for (path, body) in files {
            let file = work.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, body).unwrap();
        }
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "-m", "site"]);
        git(
            dir.path(),
            &[
                "clone",
                "-q",
                "--bare",
                work.to_str().unwrap(),
                bare.to_str().unwrap(),
            ],
        );
        (dir, bare)
    }

    fn plan_of(store: &SiteStore, repo: &std::path::Path, path: &str) -> Plan {
        let path = TreePath::parse(path).unwrap();
        // The store knows each repo's root by its name: one per repo.
        let name = repo.to_string_lossy().into_owned();
        plan(
            store,
            &name,
            repo,
            ("refs/heads/pages", &[]),
            &path,
            "/base/",
            1,
        )
        .unwrap()
        .expect("the site exists")
        .1
    }

    fn file_name(plan: &Plan) -> Option<(StatusCode, String)> {
        match plan {
            Plan::File(head) => {
                Some((head.status, head.content_type.to_str().unwrap().to_string()))
            }
            _ => None,
        }
    }

    #[test]
    fn every_resolution_rule() {
        let (_dir, repo) = site(&[
            ("index.html", "<h1>home</h1>"),
            ("docs/index.html", "<h1>docs</h1>"),
            ("docs/guide.css", "b{}"),
            ("404.html", "<h1>lost</h1>"),
        ]);
        let store = SiteStore::new(1 << 20, Arc::new(vole_git::GixHandles::new(16)));
        let html = || Some((StatusCode::OK, "text/html; charset=utf-8".to_string()));
        // A file is served; a directory with its slash serves its index.
        assert_eq!(file_name(&plan_of(&store, &repo, "")), html());
        assert_eq!(file_name(&plan_of(&store, &repo, "docs/")), html());
        assert_eq!(
            file_name(&plan_of(&store, &repo, "docs/guide.css")),
            Some((StatusCode::OK, "text/css; charset=utf-8".to_string()))
        );
        // Without the slash: a redirect to it; index.html: to its directory.
        assert!(
            matches!(plan_of(&store, &repo, "docs"), Plan::Redirect(to) if to == "/base/docs/")
        );
        assert!(
            matches!(plan_of(&store, &repo, "docs/index.html"), Plan::Redirect(to) if to == "/base/docs/")
        );
        assert!(
            matches!(plan_of(&store, &repo, "index.html"), Plan::Redirect(to) if to == "/base/")
        );
        // A file asked for as a directory, or nothing at all: the site's 404.
        for missing in ["docs/guide.css/", "nope.html", "docs/nope/"] {
            assert_eq!(
                file_name(&plan_of(&store, &repo, missing)),
                Some((
                    StatusCode::NOT_FOUND,
                    "text/html; charset=utf-8".to_string()
                )),
                "{missing}"
            );
        }
        // No 404.html: a plain not found.
        let (_dir2, bare) = site(&[("a.txt", "a")]);
        assert!(matches!(plan_of(&store, &bare, "b.txt"), Plan::NotFound));
        // No such branch: no site.
        let path = TreePath::parse("").unwrap();
        assert!(
            plan(
                &store,
                "t/site2",
                &bare,
                ("refs/heads/gh-pages", &[]),
                &path,
                "/",
                1
            )
            .unwrap()
            .is_none()
        );
    }
}
