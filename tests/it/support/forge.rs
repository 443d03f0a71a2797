//! `Forge`: the fixture most integration tests start from. A temporary
//! directory (work trees go in it), a data dir with the repos the test
//! names, made by `vole repo create`, and `vole serve` on it, stopped and
//! started again as the test asks. What a test needs beyond it (tokens,
//! URLs of its own shape) it keeps beside it.

use std::path::PathBuf;

use serde_json::Value;

use super::{TestServer, TestServerBuilder, run_vole, text};

pub struct Forge {
    /// The test's directory; removed when the fixture is dropped.
    pub dir: PathBuf,
    pub data: PathBuf,
    server: Option<TestServer>,
    listen: String,
    flags: Vec<String>,
    _tmp: tempfile::TempDir,
}

impl Forge {
    /// A data dir holding `repos` (each `owner/name`), no server yet.
    pub fn new(repos: &[&str]) -> Forge {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let forge = Forge {
            data: dir.join("data"),
            dir,
            server: None,
            listen: "127.0.0.1:0".into(),
            flags: Vec::new(),
            _tmp: tmp,
        };
        for repo in repos {
            forge.create_repo(&[repo]);
        }
        forge
    }

    /// `vole repo create ARGS` on the data dir (the server not running).
    pub fn create_repo(&self, args: &[&str]) {
        let mut all = vec!["repo", "create"];
        all.extend_from_slice(args);
        let made = run_vole(&self.data, &all);
        assert!(made.status.success(), "{}", text(&made.stderr));
    }

    /// [`Forge::new`] and [`Forge::serve`] in one.
    pub fn start(repos: &[&str], flags: &[&str]) -> Forge {
        let mut forge = Forge::new(repos);
        forge.serve(flags);
        forge
    }

    /// Starts `vole serve` with `flags` (kept for [`Forge::restart`]).
    pub fn serve(&mut self, flags: &[&str]) {
        self.flags = flags.iter().map(|f| f.to_string()).collect();
        self.restart();
    }

    /// As [`Forge::serve`], listening on `listen`.
    pub fn serve_on(&mut self, listen: &str, flags: &[&str]) {
        self.listen = listen.to_string();
        self.serve(flags);
    }

    /// Stops the server if it runs and starts it again with its flags.
    pub fn restart(&mut self) {
        self.restart_built(|builder| builder);
    }

    /// [`Forge::restart`], the server built by `build` from the fixture's
    /// own builder (its data dir, address and flags).
    pub fn restart_built(&mut self, build: impl FnOnce(TestServerBuilder) -> TestServerBuilder) {
        if let Some(server) = self.server.take() {
            server.stop();
        }
        let mut builder = TestServer::builder().data(&self.data).listen(&self.listen);
        for flag in &self.flags {
            builder = builder.arg(flag);
        }
        self.server = Some(build(builder).start());
    }

    /// [`Forge::restart`] with other flags.
    pub fn restart_with(&mut self, flags: &[&str]) {
        self.flags = flags.iter().map(|f| f.to_string()).collect();
        self.restart();
    }

    pub fn server(&self) -> &TestServer {
        self.server.as_ref().expect("the server runs")
    }

    /// The server, taken out of the fixture (to stop or kill it).
    pub fn take_server(&mut self) -> Option<TestServer> {
        self.server.take()
    }

    /// `path` on the server, as a URL.
    pub fn url(&self, path: &str) -> String {
        self.server().url(path)
    }

    /// The bare repo `owner/name` on disk.
    pub fn bare(&self, repo: &str) -> PathBuf {
        self.data.join(format!("repos/{repo}.git"))
    }

    /// The ref log's rows, via `vole log dump --json` (works while the
    /// server runs).
    pub fn ref_log_rows(&self) -> Vec<Value> {
        let out = run_vole(&self.data, &["log", "dump", "--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|row| row["log"] == "refs")
            .collect()
    }
}
