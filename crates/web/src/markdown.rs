//! The text of issues, pull requests and comments as HTML: CommonMark by
//! the same parser, options and sanitizer as READMEs, and `#12` in the
//! text (not in code or a code block, not inside a link) linked to issue or pull request
//! 12 of the repo when there is one. What a link points to is looked up
//! once per page for every number its texts name ([`references`]), so a
//! page of 500 comments asks the store once.

use std::collections::{BTreeSet, HashMap};

use pulldown_cmark::{Event, Tag, TagEnd};
use vole_meta::entity::ThreadKind;

/// Most distinct `#N` one page links; past that, the text stays text (a
/// comment of a million `#1`s costs one lookup per number, bounded).
const MAX_REFERENCES: usize = 500;

/// The numbers `#N` names in `texts` (a superset: code spans count too;
/// the renderer links only what is in prose), at most [`MAX_REFERENCES`].
pub(crate) fn references<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<u64> {
    let mut numbers = BTreeSet::new();
    for text in texts {
        for (_, number, _) in mentions(text) {
            if numbers.len() == MAX_REFERENCES {
                return numbers.into_iter().collect();
            }
            numbers.insert(number);
        }
    }
    numbers.into_iter().collect()
}

/// Each `#N` in `text`: where it starts, its number and where it ends. A
/// mention stands alone: not after a letter, digit, `&` or `/` (so `a#1`,
/// `&#39;` and URLs' fragments are not), not followed by a letter or
/// digit.
fn mentions(text: &str) -> impl Iterator<Item = (usize, u64, usize)> + '_ {
    let bytes = text.as_bytes();
    text.match_indices('#').filter_map(move |(at, _)| {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'&' || b == b'/' || b == b'_')
        {
            return None;
        }
        let digits = bytes[at + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let end = at + 1 + digits;
        if digits == 0 || digits > 12 || bytes.get(end).is_some_and(|b| b.is_ascii_alphanumeric()) {
            return None;
        }
        let number = text[at + 1..end].parse().ok().filter(|n| *n > 0)?;
        Some((at, number, end))
    })
}

/// What `#N` links to: the repo and the kind of each number it has.
pub(crate) struct Links<'a> {
    pub repo: &'a str,
    pub kinds: &'a HashMap<u64, ThreadKind>,
}

impl Links<'_> {
    fn href(&self, number: u64) -> Option<String> {
        let noun = match self.kinds.get(&number)? {
            ThreadKind::Issue => "issues",
            ThreadKind::Change => "pulls",
        };
        Some(format!("/{}/-/{noun}/{number}", self.repo))
    }
}

/// `text` as sanitized HTML (scripts, event attributes, `javascript:`
/// URLs and anything else that could run removed by ammonia).
pub(crate) fn render(text: &str, links: &Links<'_>) -> String {
    let parser = pulldown_cmark::Parser::new_ext(
        text,
        pulldown_cmark::Options::ENABLE_TABLES
            | pulldown_cmark::Options::ENABLE_STRIKETHROUGH
            | pulldown_cmark::Options::ENABLE_TASKLISTS,
    );
    // Inside a link or an image, `#N` is the link's text, and inside a
    // code block it is code: left alone.
    let mut in_link = 0usize;
    let mut events = Vec::new();
    for event in parser {
        match event {
            Event::Start(Tag::Link { .. } | Tag::Image { .. } | Tag::CodeBlock(_)) => in_link += 1,
            Event::End(TagEnd::Link | TagEnd::Image | TagEnd::CodeBlock) => {
                in_link = in_link.saturating_sub(1)
            }
            // The page has its own h1 and the thread's title: headings
            // move one level down, as in READMEs.
            Event::Start(Tag::Heading {
                level,
                id,
                classes,
                attrs,
            }) => {
                events.push(Event::Start(Tag::Heading {
                    level: crate::readme::demote(level),
                    id,
                    classes,
                    attrs,
                }));
                continue;
            }
            Event::End(TagEnd::Heading(level)) => {
                events.push(Event::End(TagEnd::Heading(crate::readme::demote(level))));
                continue;
            }
            Event::Text(text) if in_link == 0 => {
                link_mentions(&text, links, &mut events);
                continue;
            }
            _ => {}
        }
        events.push(event);
    }
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events.into_iter());
    ammonia::Builder::default()
        .link_rel(Some("noopener noreferrer nofollow"))
        .clean(&html)
        .to_string()
}

/// `text` as events, each `#N` that names a thread as a link to it.
fn link_mentions<'t>(text: &str, links: &Links<'_>, events: &mut Vec<Event<'t>>) {
    let mut from = 0;
    for (at, number, end) in mentions(text) {
        let Some(href) = links.href(number) else {
            continue;
        };
        if at > from {
            events.push(Event::Text(text[from..at].to_string().into()));
        }
        // The href is made of a checked repo name and digits: nothing in
        // it needs escaping.
        events.push(Event::InlineHtml(
            format!(r#"<a href="{href}">#{number}</a>"#).into(),
        ));
        from = end;
    }
    if from < text.len() {
        events.push(Event::Text(text[from..].to_string().into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn html(text: &str) -> String {
        let kinds = HashMap::from([(12, ThreadKind::Issue), (13, ThreadKind::Change)]);
        render(
            text,
            &Links {
                repo: "alice/repo",
                kinds: &kinds,
            },
        )
    }

    #[test]
    fn a_number_links_to_its_issue_or_pull_request_in_prose_only() {
        let out = html("see #12 and #13, not #14; `#12` [#12](https://x.org) a#12 &#12; #12a");
        assert!(
            out.contains(
                r#"<a href="/alice/repo/-/issues/12" rel="noopener noreferrer nofollow">#12</a>"#
            ),
            "{out}"
        );
        assert!(out.contains(r#"href="/alice/repo/-/pulls/13""#), "{out}");
        assert!(
            !out.contains("issues/14"),
            "a number with no thread stays text: {out}"
        );
        assert_eq!(out.matches("/-/issues/12").count(), 1, "{out}");
        assert!(out.contains("<code>#12</code>"), "{out}");
        let fenced = html("```\nsee #12\n```\n\n    indented #13\n");
        assert!(
            !fenced.contains("href")
                && fenced.contains("see #12")
                && fenced.contains("indented #13"),
            "a number in a code block is linked: {fenced}"
        );
        assert_eq!(references(["#1 #2 x#3 #0 #2"]), vec![1, 2]);
    }

    #[test]
    fn markup_that_could_run_is_removed() {
        let out = html(
            "<script>alert(1)</script> <img src=x onerror=alert(2)> [x](javascript:alert(3)) <a href=\"javascript:alert(4)\">y</a>",
        );
        for bad in ["<script", "onerror", "href=\"javascript"] {
            assert!(!out.contains(bad), "{bad} survived: {out}");
        }
        assert!(
            out.contains("<img src=\"x\">"),
            "the image itself stays: {out}"
        );
        // In a paragraph the link is parsed as one, and its URL dropped.
        let out = html("see [x](javascript:alert(3)) and ![i](javascript:alert(4))");
        assert!(out.contains(">x</a>"), "anti-vacuity: a link: {out}");
        assert!(!out.contains("javascript"), "{out}");
    }

    #[test]
    fn a_page_looks_up_at_most_max_references_numbers() {
        let text: String = (1..=2 * MAX_REFERENCES as u64)
            .map(|n| format!("#{n} "))
            .collect();
        let found = references([text.as_str(), "#99999"]);
        assert_eq!(
            found.len(),
            MAX_REFERENCES,
            "a page of many `#N` asks the store for every one of them"
        );
        assert_eq!(found.first(), Some(&1), "anti-vacuity: numbers were found");
    }
}
