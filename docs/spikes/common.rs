//! Helpers shared by the benchmark harnesses under `docs/spikes/`: running
//! commands, an isolated git, the release vole binary, ports and arguments.

#![allow(dead_code)] // each harness uses a different subset

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs a command to success and returns its stdout.
pub fn sh(cmd: &mut Command) -> String {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// git in `dir` with no user or system config and frozen identities/dates.
pub fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@example.org")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@example.org")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z");
    c
}

/// The `vole` binary a harness measures: the one `VOLE_BIN` names (another
/// build, as the before-after harness passes), or else the release build of
/// this checkout, built first if needed.
pub fn release_vole() -> PathBuf {
    if let Some(path) = std::env::var_os("VOLE_BIN") {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "VOLE_BIN={} is not a file", path.display());
        return path;
    }
    sh(Command::new(env!("CARGO")).args(["build", "--release", "--quiet", "--bin", "vole"]));
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/vole")
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The value after `--name` on the command line.
pub fn arg_text(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// A numeric `--name N`, or `default`.
pub fn arg(name: &str, default: u64) -> u64 {
    arg_text(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The median; of an even count, the mean of the two middle values.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

/// Starts `vole serve --anonymous-push` on `port` with `data`, and waits
/// until it answers `/healthz` (the port is bound before the logs are
/// replayed and the hooks written; the answer comes only after both).
pub fn start_vole(vole: &Path, data: &Path, port: u16) -> Child {
    start_vole_with(vole, data, port, &[])
}

/// [`start_vole`] with more flags.
pub fn start_vole_with(vole: &Path, data: &Path, port: u16, extra: &[&str]) -> Child {
    let child = Command::new(vole)
        .args([
            "serve",
            "--anonymous-push",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data",
        ])
        .arg(data)
        .args(extra)
        // `VOLE_BENCH_LOG=info` runs it as a user would: a line a request,
        // written to a file beside the data dir.
        .env(
            "VOLE_LOG",
            std::env::var("VOLE_BENCH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(Stdio::null())
        .stderr(match std::env::var_os("VOLE_BENCH_LOG") {
            Some(_) => Stdio::from(std::fs::File::create(data.with_extension("log")).unwrap()),
            None => Stdio::null(),
        })
        .spawn()
        .expect("start vole");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !healthy(port) {
        assert!(
            Instant::now() < deadline,
            "vole on port {port} did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn healthy(port: u16) -> bool {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut answer = String::new();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .and_then(|()| stream.read_to_string(&mut answer))
        .is_ok()
        && answer.starts_with("HTTP/1.1 200")
}

/// Every process below `root`.
pub fn descendants(root: u32) -> Vec<u32> {
    let mut parent = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        if let Some(ppid) = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok())
        {
            parent.push((pid, ppid));
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for (c, pp) in &parent {
            if *pp == p {
                out.push(*c);
                todo.push(*c);
            }
        }
    }
    out
}

/// A server under test and the processes it is made of.
pub struct Server {
    pub name: &'static str,
    pub base: String,
    pub repos: PathBuf,
    pub server_pids: Vec<u32>,
    pub child_roots: Vec<u32>,
    pub children: Vec<Child>,
}

impl Drop for Server {
    fn drop(&mut self) {
        for c in &mut self.children {
            kill_group(c);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Spawns `cmd` as the leader of a process group of its own, so that
/// [`kill_group`] reaches the workers it forks (fcgiwrap's prefork
/// children outlive their parent otherwise, holding its stderr).
pub fn spawn_in_group(cmd: &mut Command) -> Child {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"))
}

/// SIGKILLs the process group `child` leads, if it leads one.
pub fn kill_group(child: &Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(std::process::Stdio::null())
        .status();
}

/// Waits until something listens on `port`.
pub fn wait_http(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "server on {port} did not come up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Where Debian's git keeps `git-http-backend` (the one the baseline runs).
pub const GIT_HTTP_BACKEND_DIR: &str = "/usr/local/libexec/git-core";

/// `git http-backend` behind nginx + fcgiwrap, with vole's git settings
/// for its children (less `DURABLE_WRITES` unless `baseline_sync`).
pub fn start_nginx(dir: &Path, baseline_sync: bool) -> Server {
    let port = free_port();
    let root = dir.join("nginx");
    let repos = root.join("repos");
    std::fs::create_dir_all(&repos).unwrap();
    let socket = root.join("fcgi.sock");
    let _ = std::fs::remove_file(&socket);
    let fcgi = spawn_in_group(
        Command::new("fcgiwrap")
            .args(["-c", "4", "-s"])
            .arg(format!("unix:{}", socket.display()))
            .stdout(Stdio::null()),
    );
    let mut params = String::new();
    // Same git settings as vole gives its children (receive-pack's
    // superset), less the syncs unless asked for (see the module doc).
    let config: Vec<(String, String)> =
        vole_transport::git_config(vole_transport::Service::ReceivePack)
            .into_iter()
            .filter(|(key, _)| {
                baseline_sync || !vole_git::DURABLE_WRITES.iter().any(|(k, _)| k == key)
            })
            .collect();
    params.push_str(&format!(
        "fastcgi_param GIT_CONFIG_COUNT {};\n",
        config.len()
    ));
    for (i, (k, v)) in config.iter().enumerate() {
        params.push_str(&format!(
            "fastcgi_param GIT_CONFIG_KEY_{i} {k};\nfastcgi_param GIT_CONFIG_VALUE_{i} {v};\n"
        ));
    }
    let r = root.display();
    let conf = format!(
        "worker_processes 1;\nuser root;\ndaemon off;\nerror_log {r}/error.log;\npid {r}/nginx.pid;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n access_log off;\n client_body_temp_path {r}/body;\n fastcgi_temp_path {r}/fcgi;\n\
         proxy_temp_path {r}/proxy;\n uwsgi_temp_path {r}/uwsgi;\n scgi_temp_path {r}/scgi;\n\
         client_max_body_size 0;\n\
         server {{\n  listen 127.0.0.1:{port};\n  location / {{\n\
         fastcgi_pass unix:{sock};\n fastcgi_read_timeout 600s;\n fastcgi_send_timeout 600s;\n\
         fastcgi_param SCRIPT_FILENAME {GIT_HTTP_BACKEND_DIR}/git-http-backend;\n\
         fastcgi_param GIT_PROJECT_ROOT {repos};\n fastcgi_param GIT_HTTP_EXPORT_ALL 1;\n\
         fastcgi_param GIT_CONFIG_NOSYSTEM 1;\n fastcgi_param GIT_CONFIG_GLOBAL /dev/null;\n\
         fastcgi_param PATH_INFO $uri;\n fastcgi_param QUERY_STRING $query_string;\n\
         fastcgi_param REQUEST_METHOD $request_method;\n fastcgi_param CONTENT_TYPE $content_type;\n\
         fastcgi_param CONTENT_LENGTH $content_length;\n fastcgi_param HTTP_CONTENT_ENCODING $http_content_encoding;\n\
         fastcgi_param GIT_PROTOCOL $http_git_protocol;\n fastcgi_param REMOTE_ADDR $remote_addr;\n{params}  }}\n }}\n}}\n",
        sock = socket.display(),
        repos = repos.display(),
    );
    let conf_path = root.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let nginx = Command::new("nginx")
        .arg("-c")
        .arg(&conf_path)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_http(port);
    let master = nginx.id();
    std::thread::sleep(Duration::from_millis(200));
    let mut server_pids = vec![master];
    server_pids.extend(descendants(master));
    server_pids.push(fcgi.id());
    Server {
        name: "nginx",
        base: format!("http://127.0.0.1:{port}"),
        repos,
        server_pids,
        child_roots: vec![fcgi.id()],
        children: vec![nginx, fcgi],
    }
}

/// The machine's CPU ticks since boot by kind (`/proc/stat`'s first line):
/// user, nice, system, idle, iowait, irq, softirq, steal. The guest fields
/// after them are already inside user.
pub fn cpu_fields() -> Vec<u64> {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|f| f.parse().ok())
        .collect()
}

/// `vole serve` (with `extra` flags) on a data dir `<dir>/<name>-data`, as
/// a [`Server`].
pub fn vole_server(dir: &Path, vole: &Path, name: &'static str, extra: &[&str]) -> Server {
    let port = free_port();
    let data = dir.join(format!("{name}-data"));
    std::fs::create_dir_all(data.join("repos")).unwrap();
    let child = start_vole_with(vole, &data, port, extra);
    let pid = child.id();
    Server {
        name,
        base: format!("http://127.0.0.1:{port}"),
        repos: data.join("repos"),
        server_pids: vec![pid],
        child_roots: vec![pid],
        children: vec![child],
    }
}

/// One keep-alive HTTP/1.1 connection to a server on 127.0.0.1, for
/// harnesses that time single requests without a client's own costs.
pub struct Conn {
    stream: std::net::TcpStream,
    reader: std::io::BufReader<std::net::TcpStream>,
}

impl Conn {
    pub fn open(port: u16) -> Conn {
        let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Conn {
            reader: std::io::BufReader::new(stream.try_clone().unwrap()),
            stream,
        }
    }

    /// One GET; `headers` are whole header lines, each ending in `\r\n`.
    /// Returns the status and the body.
    pub fn get(&mut self, path: &str, headers: &str) -> (u16, Vec<u8>) {
        self.request("GET", path, headers, b"")
    }

    /// One request with `body` (sent with its length when not empty).
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &str,
        body: &[u8],
    ) -> (u16, Vec<u8>) {
        use std::io::BufRead;
        let length = if body.is_empty() && method == "GET" {
            String::new()
        } else {
            format!("Content-Length: {}\r\n", body.len())
        };
        // One write: a request split over segments waits on the peer's
        // delayed ACK under Nagle.
        let mut request =
            format!("{method} {path} HTTP/1.1\r\nHost: x\r\n{headers}{length}\r\n").into_bytes();
        request.extend_from_slice(body);
        self.stream.write_all(&request).unwrap();
        let mut status = String::new();
        self.reader.read_line(&mut status).unwrap();
        let code = status
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let (mut length, mut chunked) = (0usize, false);
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap();
                } else if k.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = v.trim().eq_ignore_ascii_case("chunked");
                }
            }
        }
        if !chunked {
            let mut body = vec![0; length];
            self.reader.read_exact(&mut body).unwrap();
            return (code, body);
        }
        let mut body = Vec::new();
        loop {
            let mut size = String::new();
            self.reader.read_line(&mut size).unwrap();
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk).unwrap();
            if size == 0 {
                return (code, body);
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
}

/// `vole user add <user>` on `data` with `password` (given on stdin) and
/// `<user>@example.org`, then a token of `scope` for them; the token.
pub fn user_with_token(
    vole: &Path,
    data: &Path,
    user: &str,
    password: &str,
    scope: &str,
) -> String {
    let mut add = Command::new(vole)
        .args([
            "user",
            "add",
            user,
            "--email",
            &format!("{user}@example.org"),
        ])
        .args(["--password-stdin", "--data"])
        .arg(data)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    add.stdin
        .take()
        .unwrap()
        .write_all(format!("{password}\n").as_bytes())
        .unwrap();
    assert!(add.wait().unwrap().success(), "vole user add {user} failed");
    let made = sh(Command::new(vole)
        .args([
            "token", "create", "bench", "--user", user, "--scope", scope, "--data",
        ])
        .arg(data));
    made.lines().last().unwrap().to_string()
}
