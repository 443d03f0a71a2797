//! Step 1 of a fold: a shard's pending writes applied to its tree and
//! written as commits, all in memory, until the lane packs them.

use std::cell::RefCell;
use std::collections::HashMap;

use gix::ObjectId;

use crate::fold::{BuildError, PendingWrite};

/// The objects one fold cycle creates, held until they are packed. Kept
/// here rather than written through gix, whose object writer first looks
/// every object up in every pack of the repo: a sure miss for objects that
/// are new by construction, and a cost that grows with the pack count.
#[derive(Default)]
pub(crate) struct NewObjects(pub(crate) RefCell<HashMap<ObjectId, (gix::objs::Kind, Vec<u8>)>>);

impl NewObjects {
    pub(crate) fn put(&self, kind: gix::objs::Kind, data: Vec<u8>) -> Result<ObjectId, BuildError> {
        let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, kind, &data)?;
        self.0.borrow_mut().entry(id).or_insert((kind, data));
        Ok(id)
    }

    fn put_object(&self, object: &impl gix::objs::WriteTo) -> Result<ObjectId, BuildError> {
        let mut data = Vec::with_capacity(object.size() as usize);
        object.write_to(&mut data)?;
        self.put(object.kind(), data)
    }
}

/// Finds an object among this cycle's new ones, then in the repo.
struct Lookup<'a> {
    new: &'a NewObjects,
    odb: &'a dyn gix::objs::Find,
}

impl gix::objs::Find for Lookup<'_> {
    fn try_find<'b>(
        &self,
        id: &gix::oid,
        buffer: &'b mut Vec<u8>,
    ) -> gix::Result<Option<gix::objs::Data<'b>>> {
        if let Some((kind, data)) = self.new.0.borrow().get(id) {
            buffer.clear();
            buffer.extend_from_slice(data);
            return Ok(Some(gix::objs::Data {
                kind: *kind,
                object_hash: gix::hash::Kind::Sha1,
                data: buffer,
            }));
        }
        self.odb.try_find(id, buffer)
    }
}

/// Applies `writes` on top of `current`, `batch` writes per commit; the
/// new objects go to `new`.
pub(crate) fn build_commits(
    repo: &gix::Repository,
    new: &NewObjects,
    current: Option<ObjectId>,
    writes: &[PendingWrite],
    batch: usize,
    signature: &gix::actor::Signature,
) -> Result<(ObjectId, usize), BuildError> {
    let lookup = Lookup {
        new,
        odb: &repo.objects,
    };
    let root = match current {
        Some(commit) => {
            let tree = repo.find_commit(commit)?.tree_id()?.detach();
            let mut buf = Vec::new();
            let data = gix::objs::Find::try_find(&lookup, &tree, &mut buf)?
                .ok_or(BuildError::MissingTree { tree, commit })?;
            gix::objs::TreeRef::from_bytes(data.data, gix::hash::Kind::Sha1)?.into()
        }
        None => gix::objs::Tree::empty(),
    };
    // One editor for the shard: the trees it has loaded stay loaded from
    // one commit of the cycle to the next.
    let mut editor = gix::objs::tree::Editor::new(root, &lookup, gix::hash::Kind::Sha1);
    let mut tip = current;
    let mut commits = 0;
    for chunk in writes.chunks(batch.max(1)) {
        for write in chunk {
            // An empty body is a removal (no document is empty).
            if write.body.is_empty() {
                editor.remove(write.path.split('/'))?;
                continue;
            }
            let blob = new.put(gix::objs::Kind::Blob, write.body.clone())?;
            editor.upsert(
                write.path.split('/'),
                gix::objs::tree::EntryKind::Blob,
                blob,
            )?;
        }
        let tree = editor.write(|tree| new.put_object(tree))?;
        let commit = gix::objs::Commit {
            tree,
            parents: tip.into_iter().collect(),
            author: signature.clone(),
            committer: signature.clone(),
            encoding: None,
            message: fold_message(chunk).into(),
            extra_headers: Vec::new(),
        };
        tip = Some(new.put_object(&commit)?);
        commits += 1;
    }
    Ok((tip.expect("at least one write per shard"), commits))
}

/// A fold commit's message: how many writes, and the log sequences it
/// covers (`Vole-Log-Seq:` the last, `Vole-Log-Seqs:` all, as ranges).
pub(crate) fn fold_message(writes: &[PendingWrite]) -> String {
    let mut seqs: Vec<u64> = writes.iter().map(|w| w.seq).collect();
    seqs.sort_unstable();
    let mut ranges: Vec<String> = Vec::new();
    let mut i = 0;
    while i < seqs.len() {
        let start = seqs[i];
        let mut end = start;
        while i + 1 < seqs.len() && seqs[i + 1] == end + 1 {
            i += 1;
            end = seqs[i];
        }
        ranges.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    format!(
        "vole: fold {} write{}\n\nVole-Log-Seq: {}\nVole-Log-Seqs: {}\n",
        writes.len(),
        if writes.len() == 1 { "" } else { "s" },
        seqs.last().copied().unwrap_or(0),
        ranges.join(",")
    )
}
