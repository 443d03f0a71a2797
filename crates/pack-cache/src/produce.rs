//! Making a pack: git pack-objects run for an entry, its output moved
//! into the entry's file in the kernel.

use std::path::{Path, PathBuf};

use tokio::io::AsyncWriteExt;

use crate::{PackCache, PackRequest};

/// Why a pack was not made, and whose fault it was (see [`State`]).
pub(crate) struct Failure {
    pub(crate) cache: bool,
    pub(crate) why: String,
}

/// A scratch file removed however its scope ends.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl PackCache {
    /// Runs git (`args`: `[--shallow-file F] pack-objects ...`) for an
    /// entry in its own process group (which the sentinel kills should the
    /// server die): its stdout to `tmp`, renamed `pack` when pack-objects
    /// succeeded. Stops when `stop` is notified (no reader is left).
    pub(crate) async fn produce(
        &self,
        request: &PackRequest,
        args: &[String],
        out: std::fs::File,
        tmp: &Path,
        pack: &Path,
        stop: &tokio::sync::Notify,
    ) -> Result<u64, Failure> {
        let cache_failed = |why: std::io::Error| Failure {
            cache: true,
            why: why.to_string(),
        };
        // A shallow file is the request's, deleted when its upload-pack
        // ends: the producer reads its own copy.
        let mut args = args.to_vec();
        let shallow_copy = tmp.with_extension("shallow");
        let _shallow = RemoveOnDrop(shallow_copy.clone());
        if let Some(i) = args.iter().position(|a| a == "--shallow-file")
            && let Some(path) = args.get(i + 1).filter(|p| !p.is_empty())
        {
            std::fs::copy(path, &shallow_copy).map_err(cache_failed)?;
            args[i + 1] = shallow_copy.display().to_string();
        }
        let mut command = vole_git::grouped(self.git.path());
        command
            .env_clear()
            .envs(self.git.child_env())
            .env("GIT_DIR", &request.repo_dir)
            .env("GIT_CONFIG_COUNT", self.child_config.len().to_string());
        for (i, (key, value)) in self.child_config.iter().enumerate() {
            command.env(format!("GIT_CONFIG_KEY_{i}"), key);
            command.env(format!("GIT_CONFIG_VALUE_{i}"), value);
        }
        let mut child = command
            .args(&args)
            .current_dir(&request.repo_dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .process_group(0)
            .spawn()
            .map_err(cache_failed)?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let input = request.stdin.clone();
        let feed = tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
        let stdout = child
            .stdout
            .take()
            .expect("stdout is piped")
            .into_owned_fd()
            .map_err(cache_failed)?;
        // On a blocking thread, pipe to file in the kernel: through tokio's
        // file every write of git's was a hop to the blocking pool, and a
        // miss ran at a fraction of pack-objects' own pace.
        let mut copy = vole_stdx::spawn_blocking(move || splice_to_file(stdout, out));
        // The copy wins a tie with a stop: a pack that is whole is kept.
        let copied = tokio::select! {
            biased;
            copied = &mut copy => copied
                .map_err(|e| cache_failed(std::io::Error::other(e)))?
                .map_err(cache_failed)?,
            () = stop.notified() => {
                // Its output closes, which ends the copy.
                let _ = child.kill().await;
                let _ = copy.await;
                return Err(Failure { cache: true, why: "no reader is left".into() });
            }
        };
        let _ = feed.await;
        let status = child.wait().await.map_err(cache_failed)?;
        if !status.success() {
            return Err(Failure {
                cache: false,
                why: format!("pack-objects {status}"),
            });
        }
        std::fs::rename(tmp, pack).map_err(cache_failed)?;
        Ok(copied)
    }
}

/// Copies a pipe (git's output, switched to blocking mode) into `file`
/// until the pipe's end; returns the bytes copied.
fn splice_to_file(pipe: std::os::fd::OwnedFd, mut file: std::fs::File) -> std::io::Result<u64> {
    rustix::io::ioctl_fionbio(&pipe, false)?;
    splice_all(&mut std::fs::File::from(pipe), &mut file)
}

/// Moves what `from` holds, to its end, into `to`: in the kernel with
/// splice(2) where one side is a pipe (a cache entry into git's stdout,
/// git's output into an entry), a plain copy where splice does not apply
/// and nothing was moved yet. Returns the bytes moved.
pub fn splice_all<R, W>(from: &mut R, to: &mut W) -> std::io::Result<u64>
where
    R: std::io::Read + std::os::fd::AsFd,
    W: std::io::Write + std::os::fd::AsFd,
{
    let mut moved = 0u64;
    loop {
        match rustix::pipe::splice(
            from.as_fd(),
            None,
            to.as_fd(),
            None,
            1 << 20,
            rustix::pipe::SpliceFlags::MOVE,
        ) {
            Ok(0) => return Ok(moved),
            Ok(n) => moved += n as u64,
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::INVAL) if moved == 0 => return std::io::copy(from, to),
            Err(e) => return Err(e.into()),
        }
    }
}
