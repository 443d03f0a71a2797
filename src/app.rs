//! [`App`]: the one shared state of a running vole (or of a CLI command that
//! holds the data dir lock because no server runs). It opens the logs, the
//! repository and metadata stores and the recorder, and assembles each
//! service's own state from them; the router and the control socket hand
//! each service its state.

use std::path::Path;
use std::sync::Arc;

use vole_access::Access;
use vole_accounts::Accounts;
use vole_accounts::audit::AuditEvent;
use vole_api::ApiState;
use vole_config::Config;
use vole_control::ControlState;
use vole_git::Git;
use vole_git::datadir::DataDir;
use vole_git::repos::Repos;
use vole_hooks::RefMove;
use vole_hooks::recorder::{RefRecorder, RefState};
use vole_http::auth::Authn;
use vole_http::slots::ReadSlots;
use vole_log::{Entry, Log, LogError, RecordKind};
use vole_meta::MetaWrite;
use vole_meta::{MetaStore, StoreOptions};
use vole_sessions::SessionStore;
use vole_sites::{Sites, SitesState};
use vole_transport::Transport;
use vole_web::WebState;

/// The data dir's logs, one stream per record kind.
#[derive(Debug)]
pub struct Logs {
    pub refs: Arc<Log<RefMove>>,
    pub meta: Arc<Log<MetaWrite>>,
    pub audit: Arc<Log<AuditEvent>>,
}

impl Logs {
    /// Opens (replays, repairs a torn tail of) every log in `dir`: the ref
    /// log's replay rebuilds `ref_state`, `meta_records` receives the meta
    /// log's transactions (the metadata store re-folds what is not yet
    /// folded); the audit log is only appended to.
    pub fn open(
        dir: &Path,
        ref_state: &mut RefState,
        meta_records: &mut Vec<(u64, MetaWrite)>,
    ) -> Result<Logs, LogError> {
        Ok(Logs {
            refs: Arc::new(open_one::<RefMove>(dir, |e| ref_state.apply(e))?),
            meta: Arc::new(open_one::<MetaWrite>(dir, |entry| {
                if let Entry::Txn { seq, rows } = entry {
                    meta_records.extend(rows.into_iter().map(|row| (seq, row)));
                }
            })?),
            audit: Arc::new(open_one::<AuditEvent>(dir, |_| {})?),
        })
    }
}

fn open_one<K: RecordKind>(dir: &Path, visit: impl FnMut(Entry<K>)) -> Result<Log<K>, LogError> {
    let started = std::time::Instant::now();
    let (log, replay) = Log::<K>::open(dir, visit)?;
    tracing::info!(
        log = K::FILE_NAME,
        txns = replay.txns,
        last_seq = replay.last_seq(),
        torn_tail = replay.torn.is_some(),
        replay_ms = started.elapsed().as_secs_f64() * 1e3,
        "log opened"
    );
    Ok(log)
}

/// Shared state; lives behind an `Arc`. It assembles the services, each
/// with its own state (the parts of this it needs, shared by `Arc`); no
/// service imports `App`.
#[derive(Debug)]
pub struct App {
    pub config: Arc<Config>,
    pub data: DataDir,
    pub git: Git,
    pub repos: Repos,
    pub logs: Logs,
    pub recorder: Arc<RefRecorder>,
    pub meta: Arc<MetaStore>,
    pub accounts: Arc<Accounts>,
    pub access: Arc<Access>,
    pub authn: Arc<Authn>,
    pub transport: Arc<Transport>,
    pub sites: Arc<SitesState>,
    pub web: Arc<WebState>,
    pub api: Arc<ApiState>,
    pub control: Arc<ControlState>,
    /// Requests by route and status, and their latency (`GET /metrics`).
    pub http_metrics: Arc<vole_stdx::metrics::HttpMetrics>,
}

/// The data dir's stores, opened and brought up to date: the logs
/// replayed, every repo given its incarnation, the metadata store and the
/// ref recorder over them.
struct Stores {
    data: DataDir,
    repos: Repos,
    logs: Logs,
    meta: Arc<MetaStore>,
    recorder: Arc<RefRecorder>,
}

impl Stores {
    fn open(config: &Config, git: &Git) -> anyhow::Result<Stores> {
        let data = DataDir::new(config.data_dir.clone());
        let mut ref_state = RefState::default();
        let mut meta_records = Vec::new();
        let logs = Logs::open(&data.log_dir(), &mut ref_state, &mut meta_records)?;
        let repos = Repos::new(data.clone());
        // Before anything opens a repo: a repo a crash left half-created
        // would fail every git read.
        repos.finish_interrupted_creations(&config.default_branch);
        // Before the metadata and the ref state are taken from the logs:
        // each repo has an incarnation, and only what is of it is its.
        let upgrading = !data.incarnations_marker().exists();
        let (given, incarnations) = repos
            .give_incarnations(upgrading)
            .map_err(|e| anyhow::anyhow!(e).context("cannot give the repos their incarnations"))?;
        let recorded = ref_state.recorded_incarnations().clone();
        ref_state.settle(|name| incarnations.get(name).cloned());
        let mut repo_dirs: Vec<(String, std::path::PathBuf)> = repos
            .list()
            .into_iter()
            .map(|info| {
                let path = repos.path(&info.name);
                (info.name.to_string(), path)
            })
            .collect();
        // The server's own documents (users, tokens), outside data/repos.
        let system = repos
            .ensure_system_repo(git)
            .map_err(|e| anyhow::anyhow!(e).context("cannot create the system repo"))?;
        repo_dirs.push((vole_meta::SYSTEM.to_string(), system));
        let meta = Arc::new(MetaStore::open(
            logs.meta.clone(),
            &data.repos_dir(),
            &repo_dirs,
            meta_records,
            Some(git.clone()),
            StoreOptions {
                fold_batch: config.meta_fold_batch,
                fold_interval: config.meta_fold_interval,
                default_branch: config.default_branch.clone(),
                protected_branches: config.protected_branches.clone(),
                max_authored_bytes: config.quotas.max_meta_bytes_per_user,
                read_at_open: Some(config.meta_read_at_open),
                ..StoreOptions::default()
            },
        )?);
        // The upgrade: ACLs out of the repos' shard refs (which readers may
        // fetch) into the system repo.
        meta.move_acls_to_system().map_err(|e| {
            anyhow::anyhow!(e).context("cannot move the repos' ACLs to the system repo")
        })?;
        // The upgrade: numeric ids for what was made before them.
        meta.give_serials().map_err(|e| {
            anyhow::anyhow!(e).context("cannot give users, repos and issues their numeric ids")
        })?;
        meta.give_serials_once_read()
            .map_err(|e| anyhow::anyhow!(e).context("cannot start the numeric ids' upgrade"))?;
        // A repo that shared its incarnation keeps the ACL it had.
        for given in &given {
            if let Some(had) = &given.had {
                meta.copy_repo_acl(&given.name, had, &given.incarnation)
                    .map_err(|e| anyhow::anyhow!(e).context("cannot give a copied repo its ACL"))?;
            }
        }
        let recorder = Arc::new(RefRecorder::new(
            logs.refs.clone(),
            ref_state,
            repos.clone(),
        ));
        record_given_incarnations(&recorder, &given, &incarnations, &recorded, upgrading)?;
        if upgrading {
            // Once every repo's incarnation is in the ref log.
            vole_git::durable::write_synced(&data.incarnations_marker(), b"1\n")?;
        }
        Ok(Stores {
            data,
            repos,
            logs,
            meta,
            recorder,
        })
    }
}

impl App {
    /// Assembles the app over a prepared, locked data dir (opening the logs
    /// replays them).
    pub fn open(config: Config, git: Git) -> anyhow::Result<App> {
        let stores = Stores::open(&config, &git)?;
        App::assemble(Arc::new(config), git, stores)
    }

    /// Each service's state over the opened stores.
    fn assemble(config: Arc<Config>, git: Git, stores: Stores) -> anyhow::Result<App> {
        let Stores {
            data,
            repos,
            logs,
            meta,
            recorder,
        } = stores;
        let access = open_access(&config, &repos, &meta)?;
        let accounts = Arc::new(Accounts::new(
            meta.clone(),
            logs.audit.clone(),
            config.auth.password_auth,
            open_sessions(&data, &config)?,
        ));
        let authn = Arc::new(Authn::new(accounts.clone(), &config.auth));
        // One pool of read-side git children for the web UI and sites.
        let reads = Arc::new(ReadSlots::new(
            config.reads.slots,
            config.transport.queue_timeout,
        ));
        let pack_cache = open_pack_cache(&data, &git, &config.pack_cache)?;
        let (gix, web_caches, forget) = read_caches(&config.caches);
        let control = Arc::new(ControlState {
            config: config.clone(),
            git: git.clone(),
            repos: repos.clone(),
            recorder: recorder.clone(),
            meta: meta.clone(),
            access: access.clone(),
            accounts: accounts.clone(),
            pack_cache,
            gix: gix.clone(),
            forget,
        });
        let api = Arc::new(ApiState {
            meta: meta.clone(),
            recorder: recorder.clone(),
            access: access.clone(),
            repos: repos.clone(),
            control: control.clone(),
            quotas: vole_api::quota::Quotas::new(&config.quotas),
            public_url: config.public_url.clone(),
            reads: reads.clone(),
            pull_details: vole_api::pull_details(),
            issue_json: vole_api::issue_json(),
            hook_guard: vole_webhooks::guard::Guard::new(config.webhook_allow.clone()),
            webhooks: open_webhooks(&data, &config)?,
        });
        Ok(App {
            http_metrics: Arc::new(vole_stdx::metrics::HttpMetrics::new()),
            transport: Arc::new(Transport::new(&config, &data, git.clone(), access.clone())),
            sites: Arc::new(SitesState {
                sites: Sites::new(&config, gix.clone()),
                git: git.clone(),
                recorder: recorder.clone(),
                meta: meta.clone(),
                repos: repos.clone(),
                access: access.clone(),
                reads: reads.clone(),
                read_limits: config.reads.clone(),
                sessions: browser_sessions(&authn, &config),
            }),
            web: Arc::new(WebState {
                config: config.clone(),
                git: git.clone(),
                repos: repos.clone(),
                recorder: recorder.clone(),
                access: access.clone(),
                reads: reads.clone(),
                highlighter: Arc::new(vole_web::highlight::Highlighter::for_reads(&config.reads)),
                caches: web_caches,
                gix,
                authn: authn.clone(),
                sessions: browser_sessions(&authn, &config),
                accounts: accounts.clone(),
                api: api.clone(),
                form_limits: Default::default(),
            }),
            api: api.clone(),
            control,
            recorder,
            meta,
            accounts,
            authn,
            access,
            logs,
            repos,
            data,
            git,
            config,
        })
    }
}

/// The access decisions over `repos` and `meta`.
fn open_access(
    config: &Config,
    repos: &Repos,
    meta: &Arc<MetaStore>,
) -> anyhow::Result<Arc<Access>> {
    let access = Access::new(
        repos.clone(),
        meta.clone(),
        config.anonymous_push,
        config.protected_branches.clone(),
    )
    .map_err(|e| {
        anyhow::anyhow!(e).context(format!(
            "cannot resolve the repos dir {}",
            repos.root().display()
        ))
    })?;
    Ok(Arc::new(access))
}

/// Who a browser's session cookie stands for, for the web pages and sites.
fn browser_sessions(authn: &Arc<Authn>, config: &Config) -> Arc<vole_http::browser::Sessions> {
    Arc::new(vole_http::browser::Sessions {
        authn: authn.clone(),
        cookies: vole_http::browser::Cookies::for_public_url(config.public_url.as_deref()),
    })
}

/// The browser sessions' store (`data/sessions.jsonl`), replayed.
/// The webhooks log and the deliveries over it (started by the server).
fn open_webhooks(
    data: &DataDir,
    config: &Config,
) -> anyhow::Result<Arc<vole_webhooks::deliver::Deliveries>> {
    use vole_webhooks::{deliver, guard, queue};
    let queue = queue::Queue::open(&data.log_dir(), queue::Bounds::default())
        .map_err(|e| anyhow::anyhow!(e).context("cannot open the webhooks log"))?;
    let settings = deliver::Settings {
        retry: config.webhook_retry.clone(),
        timeout: config.webhook_timeout,
        workers: 16,
        per_host: 4,
    };
    let guard = guard::Guard::new(config.webhook_allow.clone());
    deliver::Deliveries::new(Arc::new(queue), guard, settings)
        .map(Arc::new)
        .map_err(|e| anyhow::anyhow!(e))
}

fn open_sessions(data: &DataDir, config: &Config) -> anyhow::Result<Arc<SessionStore>> {
    let expiry = vole_sessions::Expiry {
        idle: config.auth.session_idle,
        absolute: config.auth.session_absolute,
    };
    let store = SessionStore::open(&data.sessions_file(), expiry, std::time::SystemTime::now())
        .map_err(|e| anyhow::anyhow!(e).context("cannot open the browser sessions"))?;
    Ok(Arc::new(store))
}

/// The repos' gix handles, and the web pages' caches: read by the web UI
/// and the sites, dropped by the repo lifecycle (through the [`Forget`]
/// hook the control state is given).
///
/// [`Forget`]: vole_control::Forget
fn read_caches(
    caches: &vole_config::CacheSettings,
) -> (
    Arc<vole_git::GixHandles>,
    Arc<vole_web::caches::WebCaches>,
    vole_control::Forget,
) {
    let gix = Arc::new(vole_git::GixHandles::new(caches.max_open_repos));
    let web_caches = Arc::new(vole_web::caches::WebCaches::new(caches.web_cache_bytes));
    let forget = {
        let web_caches = web_caches.clone();
        vole_control::Forget(Arc::new(move |incarnation| {
            web_caches.forget(incarnation.id())
        }))
    };
    (gix, web_caches, forget)
}

/// The pack cache, which runs pack-objects with the settings of every
/// upload's git children.
fn open_pack_cache(
    data: &DataDir,
    git: &Git,
    settings: &vole_config::PackCacheSettings,
) -> anyhow::Result<Arc<vole_pack_cache::PackCache>> {
    Ok(Arc::new(
        vole_pack_cache::PackCache::new(
            data.pack_cache_dir(),
            settings.clone(),
            git.clone(),
            vole_transport::git_config(vole_transport::Service::UploadPack),
        )
        .map_err(|e| anyhow::anyhow!(e).context("cannot prepare the pack cache"))?,
    ))
}

/// The incarnations given at this start, in the ref log: an `adopted` row
/// for one that adopts the records from before (the upgrade; also for a
/// repo whose file a crash left without its row), a `born` row for a new
/// one (a repo copied in by hand is a new repo).
fn record_given_incarnations(
    recorder: &RefRecorder,
    given: &[vole_git::repos::Given],
    incarnations: &std::collections::HashMap<String, vole_git::repos::Incarnation>,
    recorded: &std::collections::HashMap<String, String>,
    upgrading: bool,
) -> anyhow::Result<()> {
    let mut marked: Vec<(vole_git::repos::RepoName, vole_git::repos::Incarnation)> = given
        .iter()
        .map(|g| (g.name.clone(), g.incarnation.clone()))
        .collect();
    if upgrading {
        for (name, incarnation) in incarnations {
            let logged = recorded.get(name).map(String::as_str);
            let Ok(name) = vole_git::repos::RepoName::parse(name) else {
                continue;
            };
            if marked.iter().any(|(given, _)| *given == name) {
                continue;
            }
            if incarnation.owns(None) && logged != Some(incarnation.id()) {
                marked.push((name, incarnation.clone()));
            }
        }
    }
    for (name, incarnation) in &marked {
        let phase = if incarnation.owns(None) {
            vole_hooks::Phase::Adopted
        } else {
            vole_hooks::Phase::Born
        };
        recorder.mark_incarnation(name, incarnation, phase, "vole-upgrade", "local")?;
    }
    Ok(())
}
