//! Log filters written for the module paths vole had before its workspace
//! of crates (`vole::transport=debug`) keep selecting the same lines: a
//! line's target is its module path, and the subsystems now live in crates
//! of their own (`vole_transport::...`).

/// The subsystems that were modules of the `vole` crate and are crates now,
/// by their old module name (`vole::<module>`) and their crate's target.
const MOVED: &[(&str, &str)] = &[
    ("access", "vole_access"),
    ("accounts", "vole_accounts"),
    ("api", "vole_api"),
    ("config", "vole_config"),
    ("control", "vole_control"),
    ("git", "vole_git"),
    ("repos", "vole_git::repos"),
    ("hooks", "vole_hooks"),
    ("http", "vole_http"),
    ("log", "vole_log"),
    ("meta", "vole_meta"),
    ("sites", "vole_sites"),
    ("transport::pack_cache", "vole_pack_cache"),
    ("transport", "vole_transport"),
    ("web", "vole_web"),
];

/// Every crate of the server, for a filter on `vole` as a whole.
const CRATES: &[&str] = &[
    "vole_stdx",
    "vole_log",
    "vole_git",
    "vole_config",
    "vole_pack_cache",
    "vole_hooks",
    "vole_meta",
    "vole_sessions",
    "vole_webhooks",
    "vole_accounts",
    "vole_access",
    "vole_http",
    "vole_transport",
    "vole_sites",
    "vole_web",
    "vole_control",
    "vole_api",
];

/// `filter` (an `EnvFilter` text) with each directive on an old module path
/// also given for the crate that holds that code now. Directives on other
/// targets, and the new names, pass through unchanged.
pub fn with_crate_targets(filter: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for directive in filter.split(',').filter(|d| !d.trim().is_empty()) {
        let directive = directive.trim();
        out.push(directive.to_string());
        let end = directive.find(['[', '=']).unwrap_or(directive.len());
        let (target, rest) = directive.split_at(end);
        if target == "vole" {
            out.extend(CRATES.iter().map(|name| format!("{name}{rest}")));
            continue;
        }
        let Some(path) = target.strip_prefix("vole::") else {
            continue;
        };
        let moved = MOVED
            .iter()
            .find(|(module, _)| path == *module || path.starts_with(&format!("{module}::")));
        if let Some((module, name)) = moved {
            out.push(format!("{name}{}{rest}", &path[module.len()..]));
            if *module == "transport" && path == "transport" {
                out.push(format!("vole_pack_cache{rest}"));
            }
        }
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::with_crate_targets;

    #[test]
    fn old_module_paths_name_the_crates_that_hold_them() {
        assert_eq!(
            with_crate_targets("info,vole::transport=debug"),
            "info,vole::transport=debug,vole_transport=debug,vole_pack_cache=debug"
        );
        assert_eq!(
            with_crate_targets("vole::meta::fold=trace"),
            "vole::meta::fold=trace,vole_meta::fold=trace"
        );
        assert_eq!(
            with_crate_targets("vole::transport::pack_cache=debug"),
            "vole::transport::pack_cache=debug,vole_pack_cache=debug"
        );
        assert_eq!(
            with_crate_targets("vole::web[request]=debug"),
            "vole::web[request]=debug,vole_web[request]=debug"
        );
        // `vole::server` stayed in the root crate; new names pass through.
        assert_eq!(
            with_crate_targets("warn,vole::server=debug,vole_git=trace"),
            "warn,vole::server=debug,vole_git=trace"
        );
        assert!(with_crate_targets("vole=warn").contains("vole_api=warn"));
        // A module whose name only starts like a moved one is not it.
        assert_eq!(
            with_crate_targets("vole::webhooks=info"),
            "vole::webhooks=info"
        );
    }

    /// Every crate of the workspace is in CRATES, so `vole=...` reaches all.
    #[test]
    fn crates_lists_the_workspace() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
        let mut on_disk: Vec<String> = std::fs::read_dir(root)
            .unwrap()
            .map(|e| format!("vole_{}", e.unwrap().file_name().to_string_lossy()).replace('-', "_"))
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = super::CRATES.iter().map(|c| c.to_string()).collect();
        listed.sort();
        assert!(on_disk.len() >= 10, "read no crates: {on_disk:?}");
        assert_eq!(listed, on_disk, "CRATES differs from crates/");
    }
}
