//! The Docker image's runtime test (`scripts/docker-runtime`, run by CI)
//! reads the release, packages, user, port and command from the
//! Dockerfile: here its reading is compared with the Dockerfile's own
//! lines, and the script is checked to name none of them itself, so the
//! two cannot drift.

use std::collections::HashMap;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The runtime stage of the Dockerfile (from its last `FROM`), its
/// continuation lines joined.
fn runtime_stage() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let joined = text.replace("\\\n", " ");
    let lines: Vec<&str> = joined.lines().collect();
    let last_from = lines
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .expect("a FROM line");
    lines[last_from..].iter().map(|l| l.to_string()).collect()
}

fn instruction<'a>(stage: &'a [String], name: &str) -> &'a str {
    stage
        .iter()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in the runtime stage"))
        .trim()
}

#[test]
fn the_runtime_test_reads_what_the_dockerfile_says() {
    let stage = runtime_stage();
    let out = std::process::Command::new("bash")
        .arg(root().join("scripts/docker-runtime"))
        .arg("--plan")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: HashMap<String, String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let from = instruction(&stage, "FROM");
    assert_eq!(
        format!("debian:{}-slim", plan["release"]),
        from.split_whitespace().next().unwrap()
    );
    let run = instruction(&stage, "RUN");
    let packages = run
        .split("--no-install-recommends")
        .nth(1)
        .and_then(|rest| rest.split("&&").next())
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(plan["packages"], packages);
    assert!(run.contains(&plan["useradd"]), "{run}");
    assert_eq!(plan["user"], instruction(&stage, "USER"));
    assert_eq!(plan["port"], instruction(&stage, "EXPOSE"));
    let cmd: Vec<String> = serde_json::from_str(instruction(&stage, "CMD")).unwrap();
    assert_eq!(plan["cmd"], cmd.join(" "));
    assert!(instruction(&stage, "HEALTHCHECK").ends_with(&plan["healthcheck"]));
    assert_eq!(plan["volume"], instruction(&stage, "VOLUME"));
    // The script names none of these itself: it can only follow the
    // Dockerfile.
    let script = std::fs::read_to_string(root().join("scripts/docker-runtime")).unwrap();
    for value in [
        plan["release"].as_str(),
        plan["port"].as_str(),
        "ca-certificates",
        "--system",
        "0.0.0.0",
    ] {
        assert!(
            !script.contains(value),
            "scripts/docker-runtime names {value:?} itself instead of reading it from the Dockerfile"
        );
    }
}
