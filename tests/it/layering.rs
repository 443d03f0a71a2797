//! The layering law (ARCHITECTURE.md, "Crates"). Across crates Cargo
//! keeps it: a crate can name only the crates it depends on, and the first
//! test here checks that the crate graph is the one ARCHITECTURE.md draws,
//! and that the HTTP stack is a dependency of the crates that serve HTTP
//! alone. Inside a crate of several modules, what Cargo cannot see is
//! checked by reading the source: a module may use modules of its own
//! layer or below, never above, and no two modules may reach each other,
//! however indirectly. A failure names the file, the line and what it
//! reached.
//!
//! What counts as a use: any `crate::<module>` path outside comments and
//! literals, including `use` lines (groups nested and split over lines as
//! rustfmt writes them) and paths written inline; a `crate::<item>` that
//! names no module is a use of the crate root (`lib`). Test code is exempt
//! (files named `tests.rs`, a top-level `#[cfg(test)]` module and what
//! follows it, an item under a top-level `#[cfg(test)]`): tests drive a
//! layer with the real parts above it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Layers = &'static [(&'static str, &'static [&'static str])];

/// The crates of several modules, each with its layers, bottom to top.
const CRATES: &[(&str, Layers)] = &[
    (
        // The git binary and its children, fsync, a repo's identity, merges
        // in a bare repo; then
        // what stands on them: the data dir, repos on disk, what a
        // revision names, tree paths.
        "crates/git",
        &[
            (
                "platform",
                &["lib", "bounded", "durable", "incarnation", "merge"],
            ),
            ("disk", &["datadir", "repos", "revision", "tree_path"]),
        ],
    ),
    (
        "crates/stdx",
        &[("stdx", &["lib", "error_chain", "metrics", "page", "time"])],
    ),
    (
        ".",
        &[
            ("assembly", &["lib", "app"]),
            ("server", &["server"]),
            ("cli", &["cli"]),
        ],
    ),
];

/// Crate roots that belong to no layer (the binary's `main`).
const ROOTS: &[&str] = &["main"];

/// The crates that serve HTTP: the only ones that may depend on the
/// HTTP stack.
const SERVES_HTTP: &[&str] = &[
    "vole",
    "vole-api",
    "vole-http",
    "vole-sites",
    "vole-transport",
    "vole-web",
];
const HTTP_STACK: &[&str] = &[
    "askama",
    "axum",
    "headers",
    "http-body",
    "http-body-util",
    "hyper",
    "hyper-util",
    "tower",
    "tower-http",
];

fn layer_of(layers: Layers, module: &str) -> Option<(usize, &'static str)> {
    layers
        .iter()
        .position(|(_, modules)| modules.contains(&module))
        .map(|i| (i, layers[i].0))
}

/// One `crate::x` reference.
struct Use {
    file: PathBuf,
    line: usize,
    text: String,
    from: String,
    to: String,
}

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of a crate's `src/` belongs to (`lib` for
/// the crate root).
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next().unwrap();
    let name = first.as_os_str().to_string_lossy();
    name.strip_suffix(".rs").unwrap_or(&name).to_string()
}

/// The code of a file, line by line: without `//` comments (also `///`
/// and `//!`), `/* */` comments, and the contents of string literals
/// (raw strings included) and char literals, so a message mentioning
/// `crate::x` is not a use and a `'"'` opens no string.
pub(crate) fn code_lines(text: &str) -> Vec<String> {
    let mut lines = vec![String::new()];
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    // Inside a string: how many `#` close it (`None`: a plain string).
    let mut string: Option<Option<usize>> = None;
    let mut block_comment = 0usize;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            lines.push(String::new());
            i += 1;
            continue;
        }
        let line = lines.last_mut().expect("one line at least");
        if block_comment > 0 {
            if c == '*' && next == Some('/') {
                block_comment -= 1;
                i += 2;
            } else if c == '/' && next == Some('*') {
                block_comment += 1;
                i += 2;
            } else {
                i += 1;
            }
            continue;
        }
        if let Some(hashes) = string {
            match hashes {
                None if c == '\\' => i += 2,
                None if c == '"' => {
                    string = None;
                    line.push('"');
                    i += 1;
                }
                Some(n)
                    if c == '"'
                        && chars[i + 1..].iter().take(n).filter(|h| **h == '#').count() == n =>
                {
                    string = None;
                    line.push('"');
                    i += 1 + n;
                }
                _ => i += 1,
            }
            continue;
        }
        if c == '/' && next == Some('/') {
            // The rest of the line is a comment.
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            block_comment = 1;
            i += 2;
            continue;
        }
        if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !chars[..i]
                .last()
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            let hashes = chars[i + 1..].iter().take_while(|h| **h == '#').count();
            if chars.get(i + 1 + hashes) == Some(&'"') {
                string = Some(Some(hashes));
                line.push('"');
                i += 2 + hashes;
                continue;
            }
        }
        if c == '"' {
            string = Some(None);
            line.push('"');
            i += 1;
            continue;
        }
        if c == '\'' {
            // A char literal (`'x'`, `'\''`, `'\u{..}'`) is skipped; a
            // lifetime (`'a`) is kept.
            let close = if next == Some('\\') {
                chars[i + 2..]
                    .iter()
                    .position(|x| *x == '\'')
                    .map(|p| i + 2 + p)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            if let Some(close) = close {
                line.push_str("' '");
                i = close + 1;
                continue;
            }
        }
        line.push(c);
        i += 1;
    }
    lines
}

/// Every `crate::<ident>` in code, with the index of the line it starts
/// on: also each item of a `crate::{a, b::{c, d}, e}` group, however it is
/// split over lines.
fn targets(lines: &[String]) -> Vec<(usize, String)> {
    let code = lines.join("\n");
    let line_at = |offset: usize| code[..offset].matches('\n').count();
    let ident_at = |text: &str| -> String {
        text.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("crate::").map(|p| from + p) {
        from = at + "crate::".len();
        let before = code[..at].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // e.g. `mycrate::`
        }
        let rest = &code[from..];
        let Some(group) = rest.strip_prefix('{') else {
            let ident = ident_at(rest);
            if !ident.is_empty() {
                found.push((line_at(at), ident));
            }
            continue;
        };
        // The items at depth 1 of the group.
        let mut depth = 1;
        let mut item_start = true;
        let mut offset = from + 1;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' if depth == 1 => item_start = true,
                c if item_start && (c.is_alphanumeric() || c == '_') => {
                    let ident = ident_at(&group[i..]);
                    found.push((line_at(from + 1 + i), ident));
                    item_start = false;
                }
                _ => {}
            }
            offset = from + 1 + i;
        }
        from = offset.max(from);
    }
    found
}

/// The top-level modules of a crate's `src/`, `lib` among them.
fn modules(src: &Path) -> BTreeSet<String> {
    std::fs::read_dir(src)
        .unwrap()
        .flatten()
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".rs").unwrap_or(&name).to_string()
        })
        .collect()
}

fn uses(src: &Path) -> Vec<Use> {
    let modules = modules(src);
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut uses = Vec::new();
    for file in files {
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let from = module_of(src, &file);
        let text = std::fs::read_to_string(&file).unwrap();
        let source: Vec<&str> = text.lines().collect();
        let mut lines = code_lines(&text);
        // Test code is exempt: a top-level `#[cfg(test)]` module (and all
        // after it, where test modules stand), or the one item a
        // top-level `#[cfg(test)]` stands on.
        for index in 0..source.len() {
            if source[index].trim() != "#[cfg(test)]" || source[index].starts_with(' ') {
                continue;
            }
            let item = (index + 1..source.len()).find(|&j| !source[j].trim().is_empty());
            match item {
                Some(j)
                    if source[j].trim_start().starts_with("mod ")
                        || source[j].trim_start().starts_with("pub mod ") =>
                {
                    lines.truncate(index);
                    break;
                }
                Some(j) => lines[j].clear(),
                None => {}
            }
        }
        for (index, to) in targets(&lines) {
            // `crate::Item` of the root, not a module.
            let to = if modules.contains(&to) {
                to
            } else {
                "lib".to_string()
            };
            if to != from {
                uses.push(Use {
                    file: file.clone(),
                    line: index + 1,
                    text: source.get(index).map_or("", |l| l.trim()).to_string(),
                    from: from.clone(),
                    to,
                });
            }
        }
    }
    uses
}

/// The violations in one crate: each use of a layer above, each module
/// outside the law, and each cycle among top-level modules.
fn violations(src: &Path, layers: Layers) -> Vec<String> {
    let uses = uses(src);
    let mut problems = Vec::new();
    let mut edges: BTreeMap<String, BTreeMap<String, &Use>> = BTreeMap::new();
    for u in &uses {
        let shown = || format!("{}: `{}`", place(src, u), u.text);
        if ROOTS.contains(&u.from.as_str()) {
            continue;
        }
        match (layer_of(layers, &u.from), layer_of(layers, &u.to)) {
            (None, _) => problems.push(format!(
                "{}: module `{}` is in no layer; add it to ARCHITECTURE.md's layers and to CRATES here",
                shown(),
                u.from
            )),
            (_, None) => problems.push(format!(
                "{}: `{}` is in no layer; add it to ARCHITECTURE.md's layers and to CRATES here",
                shown(),
                u.to
            )),
            (Some((from_layer, from_name)), Some((to_layer, to_name))) => {
                if to_layer > from_layer {
                    problems.push(format!(
                        "{}: `{}` ({from_name}) uses `{}` ({to_name}), a layer above its own",
                        shown(),
                        u.from,
                        u.to
                    ));
                }
                edges
                    .entry(u.from.clone())
                    .or_default()
                    .entry(u.to.clone())
                    .or_insert(u);
            }
        }
    }
    // Cycles: for each edge a -> b, is there a path b -> ... -> a?
    let mut reported = BTreeSet::new();
    for (a, targets) in &edges {
        for b in targets.keys() {
            if let Some(path) = path_between(&edges, b, a) {
                // a -> b -> ... -> a
                let cycle: Vec<String> = [a.clone(), b.clone()].into_iter().chain(path).collect();
                let key: BTreeSet<String> = cycle.iter().cloned().collect();
                if !reported.insert(key.into_iter().collect::<Vec<_>>()) {
                    continue;
                }
                let steps: Vec<String> = cycle
                    .windows(2)
                    .map(|w| {
                        let u = edges[&w[0]][&w[1]];
                        format!("{} -> {} at {} `{}`", w[0], w[1], place(src, u), u.text)
                    })
                    .collect();
                problems.push(format!("import cycle: {}", steps.join("; ")));
            }
        }
    }
    problems
}

/// `src/x.rs:12`: where a use stands, relative to the crate.
fn place(src: &Path, u: &Use) -> String {
    let file = u.file.strip_prefix(src.parent().unwrap()).unwrap();
    format!("{}:{}", file.display(), u.line)
}

/// A path of modules from `from` to `to` (excluding `from`, including
/// `to`), if any.
fn path_between(
    edges: &BTreeMap<String, BTreeMap<String, &Use>>,
    from: &str,
    to: &str,
) -> Option<Vec<String>> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![(from.to_string(), Vec::<String>::new())];
    while let Some((node, path)) = stack.pop() {
        if node == to {
            return Some(path);
        }
        if !seen.insert(node.clone()) {
            continue;
        }
        for next in edges.get(&node).into_iter().flat_map(|t| t.keys()) {
            let mut longer = path.clone();
            longer.push(next.clone());
            stack.push((next.clone(), longer));
        }
    }
    None
}

#[test]
fn no_module_uses_a_layer_above_its_own_and_no_two_modules_reach_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (dir, layers) in CRATES {
        let src = root.join(dir).join("src");
        let unlayered: Vec<String> = modules(&src)
            .into_iter()
            .filter(|m| !ROOTS.contains(&m.as_str()) && layer_of(layers, m).is_none())
            .collect();
        assert!(
            unlayered.is_empty(),
            "modules of {dir} in no layer (add them to ARCHITECTURE.md's layers and CRATES): {unlayered:?}"
        );
        let problems = violations(&src, layers);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
    // Anti-vacuity: the scan sees each crate's real uses.
    let top = uses(&root.join("src"));
    assert!(
        top.iter().any(|u| u.from == "server" && u.to == "app"),
        "the scan found no use of app in server; it reads nothing"
    );
    let git = uses(&root.join("crates/git/src"));
    assert!(
        git.iter()
            .any(|u| u.from == "repos" && u.to == "incarnation"),
        "the scan found no use of incarnation in vole-git's repos; it reads nothing"
    );
}

/// The workspace's crate graph as `cargo metadata` has it: each package's
/// normal dependencies on other packages of the workspace, and each
/// dependency on the HTTP stack of a crate that does not serve HTTP.
fn crate_graph(metadata: &serde_json::Value) -> (BTreeSet<(String, String)>, Vec<String>) {
    let packages = metadata["packages"].as_array().expect("packages");
    let names: BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().expect("a name"))
        .collect();
    let mut graph = BTreeSet::new();
    let mut http = Vec::new();
    for package in packages {
        let from = package["name"].as_str().expect("a name");
        for dep in package["dependencies"].as_array().expect("dependencies") {
            let to = dep["name"].as_str().expect("a name");
            if !dep["kind"].is_null() {
                continue; // dev and build dependencies: not the graph
            }
            if names.contains(to) {
                graph.insert((from.to_string(), to.to_string()));
            }
            if HTTP_STACK.contains(&to) && !SERVES_HTTP.contains(&from) {
                http.push(format!(
                    "{from} depends on {to}, but serves no HTTP (SERVES_HTTP in tests/it/layering.rs)"
                ));
            }
        }
    }
    (graph, http)
}

/// The edges ARCHITECTURE.md draws: each `a --> b & c` line of its
/// mermaid block under "Crates" (a crate and every crate it depends on).
fn drawn_graph(architecture: &str) -> BTreeSet<(String, String)> {
    let section = architecture
        .split("\n## Crates")
        .nth(1)
        .expect("ARCHITECTURE.md has a \"## Crates\" section");
    let block = section
        .split("```mermaid")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the Crates section draws the graph in a mermaid block");
    block
        .lines()
        .filter_map(|line| line.trim().split_once(" --> "))
        .flat_map(|(from, to)| {
            to.split(" & ")
                .map(move |to| (from.trim().to_string(), to.trim().to_string()))
        })
        .collect()
}

#[test]
fn the_crate_graph_is_the_one_architecture_md_draws_and_only_servers_speak_http() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let (graph, http) = crate_graph(&metadata);
    // Anti-vacuity: the graph read is the workspace's.
    assert!(
        graph.contains(&("vole-meta".to_string(), "vole-log".to_string())) && graph.len() > 20,
        "cargo metadata gave no workspace graph: {graph:?}"
    );
    assert!(http.is_empty(), "{}", http.join("\n"));
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let drawn = drawn_graph(&architecture);
    let undrawn: Vec<String> = graph
        .difference(&drawn)
        .map(|(a, b)| format!("{a} --> {b}"))
        .collect();
    let stale: Vec<String> = drawn
        .difference(&graph)
        .map(|(a, b)| format!("{a} --> {b}"))
        .collect();
    assert!(
        undrawn.is_empty() && stale.is_empty(),
        "ARCHITECTURE.md's crate graph is not Cargo's.\nIn Cargo.toml, not drawn: {undrawn:?}\nDrawn, not in Cargo.toml: {stale:?}"
    );
}

#[test]
fn the_crate_graph_check_sees_an_http_dependency_and_ignores_dev_dependencies() {
    let metadata = serde_json::json!({"packages": [
        {"name": "vole-meta", "dependencies": [
            {"name": "vole-log", "kind": null},
            {"name": "axum", "kind": null},
            {"name": "vole-web", "kind": "dev"},
        ]},
        {"name": "vole-log", "dependencies": [{"name": "hyper", "kind": "dev"}]},
        {"name": "vole-web", "dependencies": [{"name": "askama", "kind": null}]},
    ]});
    let (graph, http) = crate_graph(&metadata);
    assert_eq!(
        graph,
        BTreeSet::from([("vole-meta".to_string(), "vole-log".to_string())])
    );
    assert_eq!(
        http,
        ["vole-meta depends on axum, but serves no HTTP (SERVES_HTTP in tests/it/layering.rs)"]
    );
    let drawn =
        drawn_graph("# A\n## Crates\n\n```mermaid\ngraph BT\n  vole-meta --> vole-log\n```\n");
    assert_eq!(drawn, graph);
}

/// The layers of the sample crate below.
const SAMPLE: Layers = &[
    ("storage", &["log", "durable"]),
    ("names", &["page", "repos", "tree_path"]),
    ("domain", &["meta"]),
    ("http", &["http"]),
    ("services", &["transport", "api", "web"]),
    ("assembly", &["app", "server"]),
    ("cli", &["cli"]),
];

#[test]
fn the_layering_check_sees_an_upward_use_a_cycle_and_ignores_comments() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("transport")).unwrap();
    std::fs::write(
        src.join("log.rs"),
        "//! See [`crate::app`].\nlet s = \"crate::web\";\nuse crate::durable::sync_dir;\n",
    )
    .unwrap();
    std::fs::write(src.join("durable.rs"), "use crate::log::x;\n").unwrap();
    std::fs::write(
        src.join("transport/mod.rs"),
        "use crate::{app::App, http};\n#[cfg(test)]\nmod tests { use crate::cli; }\n",
    )
    .unwrap();
    std::fs::write(src.join("app.rs"), "use crate::transport;\n").unwrap();
    for module in [
        "http",
        "meta",
        "repos",
        "tree_path",
        "api",
        "cli",
        "web",
        "server",
    ] {
        std::fs::write(src.join(format!("{module}.rs")), "").unwrap();
    }
    // What rustfmt writes for a long group, nested groups, a char that is
    // a quote, a raw string and a block comment: only the uses count.
    std::fs::write(
        src.join("page.rs"),
        "let q = '\"'; let s = r#\"crate::cli \"quoted\"\"#;\n/* crate::server */\nuse crate::{\n    repos::{RepoName, Repos},\n    meta,\n};\n#[cfg(test)]\nuse crate::api;\nuse crate::tree_path;\n",
    )
    .unwrap();
    let problems = violations(&src, SAMPLE);
    let joined = problems.join("\n");
    assert!(
        joined.contains("src/transport/mod.rs:1: `use crate::{app::App, http};`: `transport` (services) uses `app` (assembly), a layer above its own"),
        "{joined}"
    );
    assert!(
        joined.contains("import cycle")
            && joined.contains("log -> durable")
            && joined.contains("durable -> log"),
        "{joined}"
    );
    assert!(!joined.contains("web"), "a string is not a use: {joined}");
    assert!(!joined.contains("cli"), "test code is exempt: {joined}");
    assert!(
        !joined.contains("src/app.rs:1: `"),
        "app -> transport is downward: {joined}"
    );
    assert!(
        joined.contains(
            "src/page.rs:5: `meta,`: `page` (names) uses `meta` (domain), a layer above its own"
        ),
        "the second item of a group split over lines, after a nested group: {joined}"
    );
    assert!(
        !joined.contains("server"),
        "a block comment is not a use: {joined}"
    );
    assert!(
        !joined.contains("`api`"),
        "a test-only item is exempt: {joined}"
    );
    assert_eq!(problems.len(), 4, "{joined}");
}
