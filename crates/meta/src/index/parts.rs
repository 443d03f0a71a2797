//! An index as text, part by part: two indexes are the same when these
//! are (the tests' entity-by-entity comparison).

use super::*;

/// Every part of an index, each in a fixed order: two indexes are the
/// same when these are (a test's entity-by-entity comparison).
pub(crate) fn parts(index: &Index) -> Vec<String> {
    fn sorted(items: impl Iterator<Item = String>) -> String {
        let mut items: Vec<String> = items.collect();
        items.sort();
        items.join("\n")
    }
    fn facets<S: std::fmt::Debug>(f: &Facets<S>) -> String {
        let set = |(k, v): (&dyn std::fmt::Debug, &facets::Numbers)| {
            format!("{k:?}: {:?}", v.iter().collect::<Vec<_>>())
        };
        sorted(
            f.by_state
                .iter()
                .map(|(k, v)| set((k, v)))
                .chain(f.by_label.iter().map(|(k, v)| set((k, v))))
                .chain(f.by_author.iter().map(|(k, v)| set((k, v)))),
        )
    }
    let mut parts: Vec<String> = index.issues.values().map(|i| format!("{i:?}")).collect();
    parts.extend(index.changes.values().map(|c| format!("{c:?}")));
    parts.extend(
        index
            .comments
            .values()
            .flat_map(|t| t.values().map(|c| format!("{c:?}"))),
    );
    parts.sort();
    parts.extend([
        facets(&index.issue_facets),
        facets(&index.change_facets),
        sorted(index.threads.iter().map(|t| format!("{t:?}"))),
        format!("{:?} {:?}", index.acl, index.settings),
        sorted(index.repo_acls.iter().map(|t| format!("{t:?}"))),
        format!("{:?} {:?} {:?}", index.users, index.tokens, index.labels),
        sorted(index.emails.iter().map(|t| format!("{t:?}"))),
        sorted(index.token_names.iter().map(|t| format!("{t:?}"))),
        sorted(index.user_tokens.iter().map(|t| format!("{t:?}"))),
        sorted(index.acl_names.iter().map(|t| format!("{t:?}"))),
        sorted(index.repo_ids.iter().map(|t| format!("{t:?}"))),
        format!(
            "{:?} {:?} {:?}",
            index.sequences, index.hooks, index.comment_serials
        ),
        sorted(index.said_by_thread.iter().map(|t| format!("{t:?}"))),
        sorted(index.authored.iter().map(|t| format!("{t:?}"))),
        format!(
            "max {} said {} entities {}",
            index.max_number, index.said_comments, index.entities
        ),
    ]);
    parts
}
