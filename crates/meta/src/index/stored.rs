//! A thread or comment as the index holds it: every field, but a body
//! longer than [`INLINE_BODY_BYTES`] left in the git blob of the version
//! held once that version is folded. What an issue costs the index is
//! then its fields and at most that many bytes of body, whatever was
//! written; the body is read back on demand ([`crate::bodies`]).

use gix::ObjectId;

use super::{Change, Comment, Index, Issue};

/// Bodies up to this long stay in the index (a read of a blob costs more
/// than they do).
pub const INLINE_BODY_BYTES: usize = 64;

/// A document with a body: issues, change requests, comments.
pub trait HasBody: Clone {
    fn body(&self) -> &str;
    fn body_mut(&mut self) -> &mut String;
}

impl HasBody for Issue {
    fn body(&self) -> &str {
        &self.body
    }
    fn body_mut(&mut self) -> &mut String {
        &mut self.body
    }
}

impl HasBody for Change {
    fn body(&self) -> &str {
        &self.body
    }
    fn body_mut(&mut self) -> &mut String {
        &mut self.body
    }
}

impl HasBody for Comment {
    fn body(&self) -> &str {
        &self.body
    }
    fn body_mut(&mut self) -> &mut String {
        &mut self.body
    }
}

/// A document as the index holds it. `fields()` has every field but the
/// body when `body_blob()` names a blob: that body is read from there
/// ([`crate::bodies::DocReader::whole`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Stored<T> {
    /// Boxed: the index's maps move and shift their values as they grow
    /// (a B-tree node's insert shifts the values after it), a pointer
    /// rather than the whole document.
    fields: Box<T>,
    /// The blob of this version's document, when its body is left there
    /// (boxed: most documents have none, and it costs them a pointer).
    blob: Option<Box<ObjectId>>,
    body_len: u32,
}

impl<T: HasBody> Stored<T> {
    /// A document held whole (a write not yet folded, or a short body).
    pub fn whole(doc: T) -> Self {
        let body_len = u32::try_from(doc.body().len()).unwrap_or(u32::MAX);
        Stored {
            fields: Box::new(doc),
            blob: None,
            body_len,
        }
    }

    /// A document whose version is the blob `blob`: a long body is left
    /// there.
    pub fn in_blob(mut doc: T, blob: ObjectId) -> Self {
        let body_len = u32::try_from(doc.body().len()).unwrap_or(u32::MAX);
        if doc.body().len() <= INLINE_BODY_BYTES {
            return Stored::whole(doc);
        }
        *doc.body_mut() = String::new();
        Stored {
            fields: Box::new(doc),
            blob: Some(Box::new(blob)),
            body_len,
        }
    }

    /// Leaves the body in `blob`, the folded blob of the version held.
    pub fn fold_into(&mut self, blob: ObjectId) {
        if self.blob.is_none() && self.fields.body().len() > INLINE_BODY_BYTES {
            *self.fields.body_mut() = String::new();
            self.blob = Some(Box::new(blob));
        }
    }

    /// Every field; the body is empty when [`Stored::body_blob`] names a
    /// blob.
    pub fn fields(&self) -> &T {
        &self.fields
    }

    /// The blob the body is to be read from, if it is not held.
    pub fn body_blob(&self) -> Option<ObjectId> {
        self.blob.as_deref().copied()
    }

    /// The body's length in bytes, held or not.
    pub fn body_len(&self) -> u64 {
        u64::from(self.body_len)
    }

    /// The body, if the index holds it.
    pub fn held_body(&self) -> Option<&str> {
        self.blob.is_none().then(|| self.fields.body())
    }

    /// The parts, for [`crate::bodies`].
    pub(crate) fn into_parts(self) -> (T, Option<ObjectId>) {
        (*self.fields, self.blob.map(|b| *b))
    }
}

/// A document held whole, or with a long body left in `blob`; or, with
/// `body_left` bytes, one whose body was already left there (read from
/// the persisted index).
pub(super) fn stored<T: HasBody>(doc: T, blob: Option<ObjectId>, body_left: u32) -> Stored<T> {
    match blob {
        Some(blob) if body_left > 0 => Stored {
            fields: Box::new(doc),
            blob: Some(Box::new(blob)),
            body_len: body_left,
        },
        Some(blob) => Stored::in_blob(doc, blob),
        None => Stored::whole(doc),
    }
}

/// Which version of which document a fold wrote, and its blob: read
/// from the folded bytes before the repo's lock is taken.
#[derive(Debug, Clone, PartialEq)]
pub struct FoldedDoc {
    of: Folded,
    id: String,
    version: u64,
    blob: ObjectId,
}

/// What a [`FoldedDoc`] is.
#[derive(Debug, Clone, PartialEq)]
enum Folded {
    Issue(u64),
    Change(u64),
    /// On the thread of this id.
    Comment(String),
}

impl FoldedDoc {
    /// The folded document at `path` whose bytes are `doc`, if it is a
    /// thread or a comment long enough to have a body the index leaves
    /// in git (the body is part of the document: a short document has a
    /// short body, which the index keeps).
    pub fn read(path: &str, doc: &[u8], hash_kind: gix::hash::Kind) -> Option<FoldedDoc> {
        #[derive(serde::Deserialize)]
        struct Version {
            id: String,
            #[serde(default)]
            number: u64,
            #[serde(default)]
            thread: String,
            version: u64,
        }
        if doc.len() <= INLINE_BODY_BYTES {
            return None;
        }
        let folded: Version = serde_json::from_slice(doc).ok()?;
        let of = if path.ends_with("/issue.json") {
            Folded::Issue(folded.number)
        } else if path.ends_with("/change.json") {
            Folded::Change(folded.number)
        } else if path.contains("/comments/") {
            Folded::Comment(folded.thread)
        } else {
            return None;
        };
        let blob = gix::objs::compute_hash(hash_kind, gix::objs::Kind::Blob, doc).ok()?;
        Some(FoldedDoc {
            of,
            id: folded.id,
            version: folded.version,
            blob,
        })
    }
}

impl Index {
    /// A fold wrote `folded`: if that is the version the index holds, a
    /// long body is left in its blob from now on (a newer version, not
    /// yet folded, stays whole). Whether it was that version.
    pub fn body_folded(&mut self, folded: &FoldedDoc) -> bool {
        fn fold<T: HasBody>(
            stored: Option<&mut Stored<T>>,
            id: impl Fn(&T) -> &str,
            version: impl Fn(&T) -> u64,
            folded: &FoldedDoc,
        ) -> bool {
            if let Some(s) = stored
                && id(s.fields()) == folded.id
                && version(s.fields()) == folded.version
            {
                s.fold_into(folded.blob);
                return true;
            }
            false
        }
        match &folded.of {
            Folded::Comment(thread) => fold(
                self.comments
                    .get_mut(thread)
                    .and_then(|comments| comments.get_mut(&folded.id)),
                |c: &Comment| &c.id,
                |c| c.version,
                folded,
            ),
            Folded::Issue(number) => fold(
                self.issues.get_mut(number),
                |i: &Issue| &i.id,
                |i| i.version,
                folded,
            ),
            Folded::Change(number) => fold(
                self.changes.get_mut(number),
                |c: &Change| &c.id,
                |c| c.version,
                folded,
            ),
        }
    }
}
