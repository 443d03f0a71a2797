//! What a revision in a URL names, read in-process with gix: a branch, a
//! tag or a commit id (full or abbreviated), peeled to its commit. One reading for every
//! surface (web pages, the API's files), so a name resolves the same
//! wherever it is asked.

use gix::ObjectId;
use gix::bstr::ByteSlice;

/// The reference `full_name` (`refs/heads/...`), when it is a valid ref
/// name and exists: a name git could never have made (`a~1`, `a b`, `..`)
/// names nothing, rather than failing the read.
pub fn find_ref<'r>(
    repo: &'r gix::Repository,
    full_name: &str,
) -> Result<Option<gix::Reference<'r>>, gix::Error> {
    // A name longer than a file name may be (255 bytes a component on
    // every common file system) could not be a loose ref, and would fail
    // the lookup with ENAMETOOLONG instead of naming nothing.
    let fits = full_name.len() <= 1024 && full_name.split('/').all(|c| c.len() <= 255);
    if !fits || gix::validate::reference::name(full_name.as_bytes().as_bstr()).is_err() {
        return Ok(None);
    }
    repo.try_find_reference(full_name)
}

/// The commit a revision names: a branch, a tag, a full commit id, or an
/// abbreviated one that names one object.
pub fn resolve(repo: &gix::Repository, rev: &str) -> Result<Option<ObjectId>, gix::Error> {
    for prefix in ["refs/heads/", "refs/tags/"] {
        if let Some(reference) = find_ref(repo, &format!("{prefix}{rev}"))? {
            let id = reference.into_fully_peeled_id()?.detach();
            return peel_to_commit(repo, id);
        }
    }
    if rev.len() == 40
        && let Ok(id) = ObjectId::from_hex(rev.as_bytes())
        && repo.has_object(id)
    {
        return peel_to_commit(repo, id);
    }
    // An abbreviated id, of 4 hex digits or more, as git takes one: the
    // one object it names (an ambiguous one names nothing).
    if (4..40).contains(&rev.len())
        && rev.bytes().all(|b| b.is_ascii_hexdigit())
        && let Ok(prefix) = gix::hash::Prefix::from_hex(rev)
        && let Ok(Some(Ok(id))) = repo.objects.lookup_prefix(prefix, None)
    {
        return peel_to_commit(repo, id);
    }
    Ok(None)
}

/// The commit `id` is or leads to (through tags); `None` when it leads to
/// a tree or a blob (a tag may name anything).
fn peel_to_commit(repo: &gix::Repository, id: ObjectId) -> Result<Option<ObjectId>, gix::Error> {
    Ok(repo
        .find_object(id)?
        .peel_to_commit()
        .ok()
        .map(|commit| commit.id))
}
