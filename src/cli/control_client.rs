//! The CLI's control client: a request carried out by the running server
//! over the control socket, or in-process under the data dir lock when none
//! runs.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::app::App;
use vole_config::Config;
use vole_control::{Reply, Request, client::Client};
use vole_git::Git;
use vole_git::datadir::{DataDir, DataDirError};

/// How long the CLI waits for a server that holds the lock but has not yet
/// opened its control socket (it is starting up).
const SERVER_STARTING_WAIT: Duration = Duration::from_secs(10);

/// Carries out `request` through the running server, or in-process under the
/// data dir lock when none runs; decodes the reply's data as `T`.
pub(super) fn call<T: serde::de::DeserializeOwned>(
    config: &Config,
    request: Request,
) -> anyhow::Result<T> {
    let data = DataDir::new(config.data_dir.clone());
    let deadline = Instant::now() + SERVER_STARTING_WAIT;
    let reply = loop {
        if let Some(mut client) = Client::connect(&data.socket_path())? {
            break client.call(request)?;
        }
        data.prepare()?;
        match data.lock("vole cli") {
            Ok(lock) => {
                let git = Git::locate(config.git.as_deref())?;
                // A command run once waits at open until every repo's
                // documents are read and the persisted index is written,
                // rather than be told to retry while a background read runs
                // (which would also outlive the data dir's lock).
                let mut config = config.clone();
                config.meta_read_at_open = Duration::from_secs(365 * 24 * 3600);
                let app = App::open(config, git)?;
                let reply = vole_control::dispatch(&app.control, request);
                // Folded into git before the lock goes: a copy of the data
                // dir taken now holds the change in its repos too.
                app.meta.close(Duration::from_secs(30));
                drop(lock);
                break reply;
            }
            Err(DataDirError::Locked { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e.into()),
        }
    };
    decode(reply)
}

pub(super) fn decode<T: serde::de::DeserializeOwned>(reply: Reply) -> anyhow::Result<T> {
    if !reply.ok {
        bail!(
            "{}",
            reply.error.unwrap_or_else(|| "request failed".to_string())
        );
    }
    serde_json::from_value(reply.data.unwrap_or_default())
        .context("the server's reply did not have the expected shape")
}
