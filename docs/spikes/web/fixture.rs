//! The web harnesses' shared parts: the benchmark repo (made by
//! `git fast-import`), cgit behind nginx + fcgiwrap on it, requests timed
//! by curl over one connection, and the children killed at the end.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::{git, kill_group, sh, spawn_in_group};

/// File `i` of the benchmark repo: in a 3-level tree, or all in `src/`.
pub fn file_path(i: usize, flat: bool) -> String {
    if flat {
        format!("src/file{i}.rs")
    } else {
        format!("src/m{}/n{}/file{i}.rs", i % 10, (i / 10) % 10)
    }
}

/// One `git fast-import` (with `args`) in `dir`, fed by `write`; it must
/// succeed.
pub fn fast_import(dir: &Path, args: &[&str], write: impl FnOnce(&mut dyn Write)) {
    let mut child = git(dir)
        .arg("fast-import")
        .args(args)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = std::io::BufWriter::new(child.stdin.take().unwrap());
    write(&mut input);
    drop(input);
    assert!(child.wait().unwrap().success(), "fast-import failed");
}

/// A repo made by fast-import: `files` files in a 3-level tree (so deep
/// trees exist) and `commits` commits, each touching a few files.
pub fn make_repo(dir: &Path, files: usize, commits: usize, flat: bool) -> String {
    std::fs::create_dir_all(dir).unwrap();
    sh(git(dir).args(["init", "-q", "-b", "main"]));
    fast_import(dir, &["--quiet"], |input| {
        write_history(input, files, commits, flat)
    });
    sh(git(dir).args(["rev-parse", "main"]))
}

/// [`make_repo`]'s history as a fast-import stream.
fn write_history(input: &mut dyn Write, files: usize, commits: usize, flat: bool) {
    let path = |i: usize| file_path(i, flat);
    let content = |i: usize, version: usize| {
        let mut text = format!("// file {i}, version {version}\n");
        for line in 0..40 {
            text.push_str(&format!(
                "pub fn f{line}(x: u64) -> u64 {{ x.wrapping_mul({}) + {line} }}\n",
                i * 31 + version
            ));
        }
        text
    };
    for c in 0..commits {
        let message = format!("commit {c}\n");
        write!(
            input,
            "commit refs/heads/main\ncommitter b <b@example.org> {} +0000\ndata {}\n{message}",
            1_700_000_000 + c,
            message.len()
        )
        .unwrap();
        // Later commits chain onto the branch's tip by themselves.
        let touched: Vec<usize> = if c == 0 {
            (0..files).collect()
        } else {
            (0..3).map(|k| (c * 7 + k * 1031) % files).collect()
        };
        if c == 0 {
            // A 200 KiB binary (random bytes: NULs in its first 8000) and
            // the bracket-and-newline file (100,000 `[`, 200,000 newlines).
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            let binary: Vec<u8> = (0..200 << 10)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 24) as u8
                })
                .collect();
            let deep = format!("{}{}", "[".repeat(100_000), "\n".repeat(200_000));
            for (name, bytes) in [
                ("bin/blob.bin", binary),
                ("data/deep.json", deep.into_bytes()),
            ] {
                write!(input, "M 100644 inline {name}\ndata {}\n", bytes.len()).unwrap();
                input.write_all(&bytes).unwrap();
                input.write_all(b"\n").unwrap();
            }
        }
        // A file with a long history: every commit rewrites one of its
        // 200 lines (the blame page's file).
        let mut long = String::new();
        for line in 0..200 {
            let version = if c >= line { c - (c - line) % 200 } else { 0 };
            long.push_str(&format!("pub fn long{line}() -> u64 {{ {version} }}\n"));
        }
        write!(
            input,
            "M 100644 inline src/long.rs\ndata {}\n{long}\n",
            long.len()
        )
        .unwrap();
        for i in touched {
            let body = content(i, c);
            write!(
                input,
                "M 100644 inline {}\ndata {}\n{body}\n",
                path(i),
                body.len()
            )
            .unwrap();
        }
    }
}

/// Per-request times (ms) of `urls`, fetched in order over one connection
/// by one curl; each body must contain `expect`.
pub fn timed(urls: &[String], expect: &str) -> Vec<f64> {
    let out_dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "--fail", "-w", "%{time_total}\n"]);
    for (i, url) in urls.iter().enumerate() {
        cmd.arg("-o")
            .arg(out_dir.path().join(format!("{i}")))
            .arg(url);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "curl failed on {}", urls[0]);
    for (i, url) in urls.iter().enumerate() {
        let body = std::fs::read_to_string(out_dir.path().join(format!("{i}"))).unwrap_or_default();
        assert!(body.contains(expect), "{url} lacks {expect:?}");
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|t| t.trim().parse::<f64>().unwrap() * 1e3)
        .collect()
}

pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

pub fn start_cgit(root: &Path, repo: &Path, port: u16) -> (Child, Child) {
    let socket = root.join("fcgi.sock");
    let fcgi = spawn_in_group(
        Command::new("fcgiwrap")
            .args(["-c", "2", "-s"])
            .arg(format!("unix:{}", socket.display()))
            .stdout(Stdio::null()),
    );
    let cgitrc = root.join("cgitrc");
    std::fs::write(
        &cgitrc,
        format!(
            "cache-size=0\nvirtual-root=/cgit/\nenable-commit-graph=0\nmax-commit-count=50\n\
             enable-blame=1\nrepo.url=big\nrepo.path={}\n",
            repo.display()
        ),
    )
    .unwrap();
    let r = root.display();
    let conf = format!(
        "worker_processes 1;\nuser root;\ndaemon off;\nerror_log {r}/error.log;\npid {r}/nginx.pid;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n access_log off;\n fastcgi_temp_path {r}/fcgi;\n client_body_temp_path {r}/body;\n\
         proxy_temp_path {r}/proxy;\n uwsgi_temp_path {r}/uwsgi;\n scgi_temp_path {r}/scgi;\n\
         server {{ listen 127.0.0.1:{port};\n\
           location /cgit/ {{ include /etc/nginx/fastcgi_params;\n\
             fastcgi_param SCRIPT_FILENAME /usr/lib/cgit/cgit.cgi;\n\
             fastcgi_param CGIT_CONFIG {cgitrc};\n\
             fastcgi_split_path_info ^(/cgit)(.*)$;\n\
             fastcgi_param PATH_INFO $fastcgi_path_info;\n fastcgi_param QUERY_STRING $args;\n\
             fastcgi_pass unix:{sock}; }} }}\n}}\n",
        cgitrc = cgitrc.display(),
        sock = socket.display()
    );
    let conf_path = root.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let nginx = Command::new("nginx")
        .arg("-c")
        .arg(&conf_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    (nginx, fcgi)
}

/// Children killed when the harness ends, also on a panic (nginx with
/// SIGTERM, so its workers go too).
pub struct Children(pub Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            kill_group(child);
        }
        for child in &mut self.0 {
            let _ = child.wait();
        }
    }
}
