//! The hook scripts in `data/hooks/`: each execs this vole binary, which
//! does the work (see [`super::cli`]); and the link git runs as the pack
//! cache's pack-objects hook. Written at every server start, so
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
    let tmp = dir.join(format!(".{PACK_OBJECTS_LINK}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(vole_exe, &tmp)?;
    std::fs::rename(&tmp, dir.join(PACK_OBJECTS_LINK))?;
    Ok(dir.to_path_buf())
}

/// The link to this binary that git runs as `uploadpack.packObjectsHook`:
/// started under this name, vole is the pack cache's reader
/// (`cli::pack_objects::pack_objects`). A path git can run without a shell saves
/// a shell per clone.
pub const PACK_OBJECTS_LINK: &str = "vole-pack-objects";

/// Characters that make git run a command through `sh -c` (git's
/// `prepare_shell_cmd`).
const SHELL_CHARS: &str = "|&;<>()$`\\\"' \t\n*?[#~=%";

/// The value of `uploadpack.packObjectsHook` for hooks in `dir`: the link
/// [`install`] makes, which git execs directly, or, where its path needs
/// the shell, `'vole' hook pack-objects` through it.
pub fn pack_objects_hook(dir: &Path, vole_exe: &Path) -> String {
    let link = dir.join(PACK_OBJECTS_LINK).to_string_lossy().into_owned();
    if link.contains(|c| SHELL_CHARS.contains(c)) {
        format!(
            "{} hook pack-objects",
            shell_quote(&vole_exe.to_string_lossy())
        )
    } else {
        link
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pack_objects_hook_needs_no_shell_where_its_path_allows() {
        use std::path::Path;
        let exe = Path::new("/usr/bin/vole");
        assert_eq!(
            super::pack_objects_hook(Path::new("/srv/data/hooks"), exe),
            "/srv/data/hooks/vole-pack-objects"
        );
        assert_eq!(
            super::pack_objects_hook(Path::new("/srv/my data/hooks"), exe),
            "'/usr/bin/vole' hook pack-objects"
        );
    }

    #[test]
    fn quotes_survive_the_shell() {
        assert_eq!(super::shell_quote("/a b/it's"), r"'/a b/it'\''s'");
    }
}
