//! Browser sessions: who a signed-in browser is. Signing in makes a
//! session and gives its secret (256 random bits, as base62) to the browser
//! as a cookie; the store keeps only the secret's SHA-256, with the user,
//! when the session began and when it was last seen. Sessions live in
//! memory and in an append-only file of their own ([`file`]), not in the
//! metadata store, so they survive a restart and a sign-in leaves no
//! history; the file is compacted when it has grown well past what is live.
//!
//! A session ends when it is signed out, when every session of its user is
//! ended (a password change, a disabled user), when it was not seen for the
//! idle limit, or when it is older than the absolute limit. "Last seen" is
//! kept coarse ([`SEEN_GRANULARITY`]): at most one unsynced line per session
//! in that long, never a write per request.
//!
//! The same file keeps when each token was last used, in the same coarse
//! steps: the tokens page shows it, and a token's use is no metadata write.
//!
//! What does not live here: cookies, CSRF and HTTP (`vole_http`), and
//! whether the user may still sign in (`vole_accounts`).

mod file;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use rand::Rng;
use sha2::{Digest, Sha256};

use file::{Appender, Record};

/// A session's "last seen" moves in steps of this much at least (or an
/// eighth of the idle limit, when that is shorter, so a session in use
/// never idles out between two marks).
pub const SEEN_GRANULARITY: Duration = Duration::from_secs(600);
/// Most live sessions one user has; signing in again past it ends that
/// user's oldest session (so a script that signs in forever holds no more).
pub const MAX_PER_USER: usize = 64;
/// Characters of a session secret (base62 of 256 bits, rounded up).
pub const SECRET_CHARS: usize = 43;
/// The file is compacted once it is this big and four times what its live
/// sessions take.
const COMPACT_FLOOR_BYTES: u64 = 1 << 20;

/// How long sessions last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    /// Ends a session not seen for this long.
    pub idle: Duration,
    /// Ends a session this long after it began, seen or not.
    pub absolute: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("sessions file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "sessions file {} line {line} is not a session record ({reason}); \
         move the file aside to start with no sessions (everyone signed out)",
        path.display()
    )]
    Corrupt {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("the user's sessions were ended while this one was being begun")]
    Ended,
}

/// The secret a browser holds for its session (the cookie's value). Its
/// `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionSecret(String);

impl SessionSecret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// A new secret: [`SECRET_CHARS`] base62 characters from rand's thread
/// generator (a CSPRNG seeded from the OS). Also what a pre-session cookie
/// (a sign-in form's CSRF binding) holds.
pub fn random_secret() -> SessionSecret {
    SessionSecret(
        rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(SECRET_CHARS)
            .map(char::from)
            .collect(),
    )
}

/// `text` has the shape of a secret (checked before anything is looked up).
pub fn is_secret_shaped(text: &str) -> bool {
    text.len() == SECRET_CHARS && text.bytes().all(|b| b.is_ascii_alphanumeric())
}

impl std::fmt::Debug for SessionSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionSecret(..)")
    }
}

/// A live session, as [`SessionStore::resolve`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub user: String,
    pub began: SystemTime,
    pub seen: SystemTime,
}

#[derive(Debug, Clone)]
struct Entry {
    user: String,
    began: u64,
    seen: u64,
}

/// The live sessions by id, and each user's ids (so that a sign-in and the
/// end of a user's sessions cost what that user has, not what all have).
#[derive(Default)]
struct Live {
    by_id: HashMap<[u8; 32], Entry>,
    by_user: HashMap<String, Vec<[u8; 32]>>,
    /// When each token (by public id) was last marked used. Marked only
    /// for tokens that authenticated, and forgotten when one is revoked:
    /// as many entries as the server has tokens.
    token_used: HashMap<String, u64>,
}

impl Live {
    fn insert(&mut self, id: [u8; 32], entry: Entry) {
        self.remove(&id);
        self.by_user.entry(entry.user.clone()).or_default().push(id);
        self.by_id.insert(id, entry);
    }

    fn remove(&mut self, id: &[u8; 32]) -> Option<Entry> {
        let entry = self.by_id.remove(id)?;
        if let Some(ids) = self.by_user.get_mut(&entry.user) {
            ids.retain(|other| other != id);
            if ids.is_empty() {
                self.by_user.remove(&entry.user);
            }
        }
        Some(entry)
    }

    fn remove_user(&mut self, user: &str) -> usize {
        let ids = self.by_user.remove(user).unwrap_or_default();
        for id in &ids {
            self.by_id.remove(id);
        }
        ids.len()
    }

    fn retain_live(&mut self, expiry: Expiry, now: u64) {
        let dead: Vec<[u8; 32]> = self
            .by_id
            .iter()
            .filter(|(_, entry)| !live(entry, expiry, now))
            .map(|(id, _)| *id)
            .collect();
        for id in dead {
            self.remove(&id);
        }
    }

    fn apply(&mut self, record: Record) {
        let id_of = |hex_id: &str| {
            let mut id = [0u8; 32];
            hex::decode_to_slice(hex_id, &mut id).ok().map(|()| id)
        };
        match record {
            Record::Begin {
                id,
                user,
                began,
                seen,
            } => {
                if let Some(id) = id_of(&id) {
                    self.insert(id, Entry { user, began, seen });
                }
            }
            Record::Seen { id, at } => {
                if let Some(entry) = id_of(&id).and_then(|id| self.by_id.get_mut(&id)) {
                    entry.seen = entry.seen.max(at);
                }
            }
            Record::End { id } => {
                if let Some(id) = id_of(&id) {
                    self.remove(&id);
                }
            }
            Record::EndUser { user } => {
                self.remove_user(&user);
            }
            Record::TokenUsed { token, at } => {
                let last = self.token_used.entry(token).or_default();
                *last = (*last).max(at);
            }
            Record::TokenForgotten { token } => {
                self.token_used.remove(&token);
            }
        }
    }
}

struct State {
    sessions: Live,
    appender: Appender,
    /// How many times each user's sessions were all ended since the store
    /// opened, by lowercased name ([`SessionStore::generation`]).
    ended: HashMap<String, u64>,
}

/// The live sessions, and their file.
pub struct SessionStore {
    expiry: Expiry,
    state: Mutex<State>,
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore")
            .field("expiry", &self.expiry)
            .field("live", &self.len())
            .finish()
    }
}

impl SessionStore {
    /// Opens (replays) the sessions file at `path`, making it if there is
    /// none; sessions expired by `now` are left out.
    pub fn open(path: &Path, expiry: Expiry, now: SystemTime) -> Result<Self, SessionError> {
        let (records, appender) = file::replay(path)?;
        let mut sessions = Live::default();
        for record in records {
            sessions.apply(record);
        }
        sessions.retain_live(expiry, seconds(now));
        Ok(SessionStore {
            expiry,
            state: Mutex::new(State {
                sessions,
                appender,
                ended: HashMap::new(),
            }),
        })
    }

    /// How many times every session of `user` was ended since the store
    /// opened. A sign-in reads it before it checks the password and hands
    /// it to [`SessionStore::begin`], so a password changed while the old
    /// one was being checked ends that sign-in too.
    pub fn generation(&self, user: &str) -> u64 {
        let state = self.state.lock();
        state.ended.get(&user.to_lowercase()).copied().unwrap_or(0)
    }

    /// Begins a session for `user` and returns its secret, unless the
    /// user's sessions were ended since `generation` was read (then
    /// [`SessionError::Ended`]). Past [`MAX_PER_USER`] the user's oldest
    /// sessions end in the same write. Not synced: a power cut can lose a
    /// sign-in, never an end.
    pub fn begin(
        &self,
        user: &str,
        generation: u64,
        now: SystemTime,
    ) -> Result<SessionSecret, SessionError> {
        let secret = random_secret();
        let id = hash(&secret.0);
        let now = seconds(now);
        let mut state = self.state.lock();
        if state.ended.get(&user.to_lowercase()).copied().unwrap_or(0) != generation {
            return Err(SessionError::Ended);
        }
        let mut records = vec![Record::Begin {
            id: hex::encode(id),
            user: user.to_string(),
            began: now,
            seen: now,
        }];
        let sessions = &state.sessions;
        let mut own: Vec<([u8; 32], u64)> = sessions
            .by_user
            .get(user)
            .into_iter()
            .flatten()
            .map(|id| (*id, sessions.by_id[id].began))
            .collect();
        if own.len() >= MAX_PER_USER {
            own.sort_by_key(|(_, began)| *began);
            for (old, _) in &own[..=own.len() - MAX_PER_USER] {
                records.push(Record::End {
                    id: hex::encode(old),
                });
            }
        }
        state.appender.append(&records, false)?;
        for record in records {
            state.sessions.apply(record);
        }
        Ok(secret)
    }

    /// The live session `secret` names, if any. Marks it seen when its
    /// last mark is [`SEEN_GRANULARITY`] old (an unsynced line; a failed
    /// write is logged and the session still answers).
    pub fn resolve(&self, secret: &str, now: SystemTime) -> Option<Session> {
        if !is_secret_shaped(secret) {
            return None;
        }
        let id = hash(secret);
        let now = seconds(now);
        let mut state = self.state.lock();
        let entry = state.sessions.by_id.get(&id)?;
        if !live(entry, self.expiry, now) {
            // Replay drops it too: no line is needed.
            state.sessions.remove(&id);
            return None;
        }
        let step = SEEN_GRANULARITY.min(self.expiry.idle / 8).as_secs();
        if now >= entry.seen + step {
            let seen = Record::Seen {
                id: hex::encode(id),
                at: now,
            };
            if let Err(e) = state.appender.append(&[seen], false) {
                tracing::warn!(error = %e, "could not mark a session seen");
            }
            if let Some(entry) = state.sessions.by_id.get_mut(&id) {
                entry.seen = now;
            }
        }
        let entry = &state.sessions.by_id[&id];
        Some(Session {
            user: entry.user.clone(),
            began: UNIX_EPOCH + Duration::from_secs(entry.began),
            seen: UNIX_EPOCH + Duration::from_secs(entry.seen),
        })
    }

    /// Ends the session `secret` names (sign-out), durably. False when
    /// there was no such session.
    pub fn end(&self, secret: &str) -> Result<bool, SessionError> {
        let id = hash(secret);
        let mut state = self.state.lock();
        if !state.sessions.by_id.contains_key(&id) {
            return Ok(false);
        }
        // Ended in memory whether or not the line is written (as in
        // `end_user`).
        let written = state.appender.append(
            &[Record::End {
                id: hex::encode(id),
            }],
            true,
        );
        state.sessions.remove(&id);
        written?;
        Ok(true)
    }

    /// Ends every session of `user` (a password change, a disabled or
    /// deleted user), durably; returns how many were live.
    pub fn end_user(&self, user: &str) -> Result<usize, SessionError> {
        let mut state = self.state.lock();
        let record = Record::EndUser {
            user: user.to_string(),
        };
        // Ended in memory whether or not the line is written: a failed
        // write is said to the caller, and the sessions do not answer
        // meanwhile.
        let written = state.appender.append(&[record], true);
        *state.ended.entry(user.to_lowercase()).or_default() += 1;
        let ended = state.sessions.remove_user(user);
        written?;
        Ok(ended)
    }

    /// Marks the token `token` (its public id) used at `now`, when its last
    /// mark is [`SEEN_GRANULARITY`] old: an unsynced line (a failed write
    /// is logged; the token still answers). Call it for tokens that
    /// authenticated only.
    pub fn mark_token_used(&self, token: &str, now: SystemTime) {
        let now = seconds(now);
        let mut state = self.state.lock();
        let last = state.sessions.token_used.get(token).copied();
        if last.is_some_and(|last| now < last + SEEN_GRANULARITY.as_secs()) {
            return;
        }
        let record = Record::TokenUsed {
            token: token.to_string(),
            at: now,
        };
        if let Err(e) = state.appender.append(std::slice::from_ref(&record), false) {
            tracing::warn!(error = %e, "could not mark a token used");
        }
        state.sessions.apply(record);
    }

    /// When the token `token` was last marked used (to
    /// [`SEEN_GRANULARITY`]), if ever since it was made.
    pub fn token_last_used(&self, token: &str) -> Option<SystemTime> {
        let state = self.state.lock();
        let at = state.sessions.token_used.get(token)?;
        Some(UNIX_EPOCH + Duration::from_secs(*at))
    }

    /// Forgets a revoked token's mark (an unsynced line; a lost or failed
    /// one, logged, leaves the mark of a token that answers no more).
    pub fn forget_token(&self, token: &str) {
        let mut state = self.state.lock();
        if !state.sessions.token_used.contains_key(token) {
            return;
        }
        let record = Record::TokenForgotten {
            token: token.to_string(),
        };
        if let Err(e) = state.appender.append(std::slice::from_ref(&record), false) {
            tracing::warn!(error = %e, "could not forget a revoked token's last use");
        }
        state.sessions.apply(record);
    }

    /// Live sessions (expired ones not yet looked at count until the next
    /// compaction).
    pub fn len(&self) -> usize {
        self.state.lock().sessions.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the sessions file.
    pub fn file_bytes(&self) -> u64 {
        self.state.lock().appender.bytes
    }

    /// Rewrites the file as its live sessions when it has grown past
    /// [`COMPACT_FLOOR_BYTES`] and four times their size (or always, with
    /// `force`); drops sessions expired by `now`. Holds the store while it
    /// writes (at 100,000 sessions, a file of about 15 MB). True when it
    /// rewrote.
    pub fn compact(&self, now: SystemTime, force: bool) -> Result<bool, SessionError> {
        let now = seconds(now);
        let mut state = self.state.lock();
        let expiry = self.expiry;
        state.sessions.retain_live(expiry, now);
        let records: Vec<Record> = state
            .sessions
            .by_id
            .iter()
            .map(|(id, entry)| Record::Begin {
                id: hex::encode(id),
                user: entry.user.clone(),
                began: entry.began,
                seen: entry.seen,
            })
            .chain(
                state
                    .sessions
                    .token_used
                    .iter()
                    .map(|(token, at)| Record::TokenUsed {
                        token: token.clone(),
                        at: *at,
                    }),
            )
            .collect();
        // A begin line is about 150 bytes (a token line less).
        let live_bytes = records.len() as u64 * 150;
        let grown = state.appender.bytes >= COMPACT_FLOOR_BYTES.max(live_bytes * 4);
        if !(force || grown) {
            return Ok(false);
        }
        state.appender.rewrite(&records)?;
        Ok(true)
    }
}

fn live(entry: &Entry, expiry: Expiry, now: u64) -> bool {
    now < entry.seen.saturating_add(expiry.idle.as_secs())
        && now < entry.began.saturating_add(expiry.absolute.as_secs())
}

fn hash(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

fn seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests;
