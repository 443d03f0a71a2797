//! The hook scripts in `data/hooks/`: each execs this vole binary, which
//! does the work (see [`super::cli`]). Written at every server start, so
//! they always name the binary that is running.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Hooks vole installs; any other file in the directory is left alone.
const HOOKS: &[(&str, &str)] = &[
    ("pre-receive", "hook pre-receive"),
    ("reference-transaction", "hook reference-transaction \"$@\""),
];

/// Writes the scripts into `dir` and returns it.
pub fn install(dir: &Path, vole_exe: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let exe = shell_quote(&vole_exe.to_string_lossy());
    for (name, args) in HOOKS {
        let path = dir.join(name);
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(
            &tmp,
            format!("#!/bin/sh\n# Written by vole serve; do not edit.\nexec {exe} {args}\n"),
        )?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(dir.to_path_buf())
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn quotes_survive_the_shell() {
        assert_eq!(super::shell_quote("/a b/it's"), r"'/a b/it'\''s'");
    }
}
