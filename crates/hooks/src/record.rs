//! The ref log's record kind: [`RefMove`], one ref moved (or about to be)
//! by one push's transaction, and its [`Phase`]; its Arrow schema and row
//! conversion. Written by the recorder, read back at start and by
//! `vole log dump`.

use serde::{Deserialize, Serialize};

use vole_log::record::{BatchError, RecordKind};

/// Where a ref move stands in git's reference transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Phase {
    /// git is about to move the ref (logged and durable before it may).
    Prepared = 0,
    /// git moved it.
    Committed = 1,
    /// git gave up; nothing moved.
    Aborted = 2,
    /// Found at start-up: a `prepared` without outcome resolved, or a ref
    /// moved on disk outside vole.
    Reconciled = 3,
    /// A compaction checkpoint row: the ref's value at the checkpoint.
    Checkpoint = 4,
    /// Found at start-up: a committed move whose write git lost (the ref
    /// file empty, unreadable, or back at the move's old value, as a power
    /// cut leaves it), written again from the log. `old` is what the disk
    /// held (none when unreadable), `new` the committed value.
    Restored = 5,
    /// HEAD (the repo's default branch) was pointed at `ref`: by a push
    /// that left it naming a missing branch, by the settings or by `vole
    /// repo default-branch`. `new` is that branch's tip then, `old` none.
    /// Not a move of `ref`: the ref state ignores it.
    Head = 6,
    /// `vole repo gc` pruned the repo's unreachable objects: no ref moved
    /// (`ref` empty, `old` and `new` none). The ref state ignores it.
    Gc = 7,
    /// A repo was created under the name: `ref` holds its incarnation
    /// ([`vole_git::repos::Incarnation`]), `old` and `new` none. The rows of
    /// the name before it belong to earlier repos of the name (deleted
    /// since), the rows after it to this one. In a compaction's checkpoint
    /// (actor `vole-checkpoint`): the incarnation the checkpoint's rows of
    /// the name are of.
    Born = 8,
    /// The upgrade to incarnations: the repo of the name present then took
    /// incarnation `ref`, and the rows of the name before it are its.
    Adopted = 9,
    /// A merge of a pull request is about to move `ref` (its target
    /// branch) from `old` to `new`, with a merge commit; `push_id` is the
    /// pull request's number. Written before the move's own `prepared`
    /// row; at start, an intent whose `new` is on its target marks its
    /// pull request merged, and one whose target never moved is dropped.
    /// Not a move: the ref state only remembers it until it is settled.
    MergeIntent = 10,
    /// The same for a fast-forward-only merge (`new` is the source's head).
    FastForwardIntent = 11,
    /// The same for a squash merge.
    SquashIntent = 12,
    /// The merge intent of pull request `push_id` of the repo is settled:
    /// its pull request was marked merged, or its merge dropped (`ref` the
    /// target branch, `old` and `new` none). Replay forgets the intent.
    MergeSettled = 13,
}

impl Phase {
    pub fn from_u8(value: u8) -> Option<Phase> {
        Some(match value {
            0 => Phase::Prepared,
            1 => Phase::Committed,
            2 => Phase::Aborted,
            3 => Phase::Reconciled,
            4 => Phase::Checkpoint,
            5 => Phase::Restored,
            6 => Phase::Head,
            7 => Phase::Gc,
            8 => Phase::Born,
            9 => Phase::Adopted,
            10 => Phase::MergeIntent,
            11 => Phase::FastForwardIntent,
            12 => Phase::SquashIntent,
            13 => Phase::MergeSettled,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Prepared => "prepared",
            Phase::Committed => "committed",
            Phase::Aborted => "aborted",
            Phase::Reconciled => "reconciled",
            Phase::Checkpoint => "checkpoint",
            Phase::Restored => "restored",
            Phase::Head => "head",
            Phase::Gc => "gc",
            Phase::Born => "born",
            Phase::Adopted => "adopted",
            Phase::MergeIntent => "merge_intent",
            Phase::FastForwardIntent => "fast_forward_intent",
            Phase::SquashIntent => "squash_intent",
            Phase::MergeSettled => "merge_settled",
        }
    }

    /// Whether the row is a merge's intent (see [`Phase::MergeIntent`]).
    pub fn is_merge_intent(self) -> bool {
        matches!(
            self,
            Phase::MergeIntent | Phase::FastForwardIntent | Phase::SquashIntent
        )
    }
}

/// One ref moved (or about to be) by one transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefMove {
    /// Nanoseconds since the Unix epoch (UTC).
    pub time_ns: i64,
    pub repo: String,
    #[serde(rename = "ref")]
    pub ref_name: String,
    /// Hex object id before; `None` when the ref is created.
    pub old: Option<String>,
    /// Hex object id after; `None` when the ref is deleted.
    pub new: Option<String>,
    /// Who moved it: the authenticated user, or `anonymous`.
    pub actor: String,
    /// The client's IP address as the server saw it (no port).
    pub client: String,
    /// Shared by the moves of one push.
    pub push_id: u64,
    pub phase: Phase,
}

impl RefMove {
    /// What the move did to its ref: `created`, `deleted` or `updated`.
    pub fn action(&self) -> &'static str {
        match (&self.old, &self.new) {
            (None, Some(_)) => "created",
            (Some(_), None) => "deleted",
            _ => "updated",
        }
    }
}

/// Bytes of a SHA-1 object id.
pub const OID_LEN: usize = vole_log::columns::OID_LEN;

/// Raw bytes of a hex oid; `None` (and anything that is not 40 hex digits)
/// becomes git's all-zero oid, which is how git itself says "no object".
fn oid_bytes(hex_oid: &Option<String>) -> [u8; OID_LEN] {
    let mut out = [0u8; OID_LEN];
    if let Some(h) = hex_oid
        && hex::decode_to_slice(h, &mut out).is_err()
    {
        out = [0u8; OID_LEN];
    }
    out
}

fn oid_hex(bytes: &[u8]) -> Option<String> {
    bytes.iter().any(|&b| b != 0).then(|| hex::encode(bytes))
}

impl RecordKind for RefMove {
    const KIND: &'static str = "ref_move";
    const FILE_NAME: &'static str = "refs.arrow";
    const SCHEMA_VERSION: u32 = 1;

    vole_log::record_columns! {
        |r| {
            time: Time("time") = r.time_ns,
            repo: Utf8("repo") = &r.repo,
            ref_name: Utf8("ref") = &r.ref_name,
            // git's all-zero oid stands for "none" (creation / deletion),
            // as in git's own hook input; no validity bitmap needed.
            old: Oid("old") = oid_bytes(&r.old),
            new: Oid("new") = oid_bytes(&r.new),
            // `user@client-address`, e.g. `alice@127.0.0.1`: one column,
            // because every column costs 48-64 bytes of IPC metadata per
            // batch, and this keeps a one-ref move within 680 bytes.
            // User names never contain '@'.
            actor: Utf8("actor") = &format!("{}@{}", r.actor, r.client);
                bytes r.actor.len() + 1 + r.client.len(),
            push_id: U64("push_id") = r.push_id,
            phase: U8("phase") = r.phase as u8,
        }
        |row| {
            let (who, client) = actor.split_once('@').unwrap_or((actor, ""));
            Ok(RefMove {
                time_ns: time,
                repo: repo.to_string(),
                ref_name: ref_name.to_string(),
                old: oid_hex(old),
                new: oid_hex(new),
                actor: who.to_string(),
                client: client.to_string(),
                push_id,
                phase: Phase::from_u8(phase).ok_or_else(|| BatchError::Value {
                    column: "phase",
                    row,
                    reason: format!("unknown phase {phase}"),
                })?,
            })
        }
    }
}
