//! [`Pagination`]: one page of a list, bounded, so no page arithmetic can
//! overflow or ask for an unbounded skip: page 1 to [`MAX_PAGE`], 1 to
//! [`MAX_PER_PAGE`] items a page. Every list (web pages, the API, a repo's
//! activity) takes one; how a request's query becomes one is the HTTP
//! layer's (`http::page`): strict in the API, lenient in the web UI.

/// The highest page number served.
pub const MAX_PAGE: u32 = 10_000;
/// The most items on one page.
pub const MAX_PER_PAGE: u32 = 100;

/// A valid page of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pagination {
    page: u32,
    per_page: u32,
}

/// Why a page or page size was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PaginationError {
    #[error("page must be a whole number from 1 to {MAX_PAGE}, got {0:?}")]
    Page(String),
    #[error("per_page must be a whole number from 1 to {MAX_PER_PAGE}, got {0:?}")]
    PerPage(String),
}

/// Digits only (no sign, no spaces, at most 20 of them): `+5` and ` 5`
/// are not page numbers; leading zeros are allowed.
fn whole_number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

impl Pagination {
    /// Page `page` of `per_page` items, if both are in range.
    pub fn new(page: u64, per_page: u64) -> Option<Pagination> {
        let page = u32::try_from(page)
            .ok()
            .filter(|p| (1..=MAX_PAGE).contains(p))?;
        let per_page = u32::try_from(per_page)
            .ok()
            .filter(|n| (1..=MAX_PER_PAGE).contains(n))?;
        Some(Pagination { page, per_page })
    }

    /// The first page of `per_page` items (clamped into range).
    pub fn first(per_page: u32) -> Pagination {
        Pagination {
            page: 1,
            per_page: per_page.clamp(1, MAX_PER_PAGE),
        }
    }

    /// Strict: `page` and `per_page` as a client sent them (absent means
    /// page 1, `default_per_page`); anything not a whole number in range
    /// is an error saying so.
    pub fn parse(
        page: Option<&str>,
        per_page: Option<&str>,
        default_per_page: u32,
    ) -> Result<Pagination, PaginationError> {
        let page_number = match page {
            None => 1,
            Some(text) => whole_number(text)
                .filter(|p| (1..=u64::from(MAX_PAGE)).contains(p))
                .ok_or_else(|| PaginationError::Page(text.to_string()))?,
        };
        let size = match per_page {
            None => u64::from(default_per_page),
            Some(text) => whole_number(text)
                .filter(|n| (1..=u64::from(MAX_PER_PAGE)).contains(n))
                .ok_or_else(|| PaginationError::PerPage(text.to_string()))?,
        };
        Pagination::new(page_number, size).ok_or_else(|| PaginationError::PerPage(size.to_string()))
    }

    /// Lenient: a page number as a person may have typed or mangled it;
    /// anything that is not a page in range is page 1.
    pub fn lenient(page: Option<&str>, per_page: u32) -> Pagination {
        let first = Pagination::first(per_page);
        page.and_then(whole_number)
            .and_then(|p| Pagination::new(p, u64::from(first.per_page)))
            .unwrap_or(first)
    }

    /// The page number, from 1.
    pub fn page(self) -> usize {
        self.page as usize
    }

    pub fn per_page(self) -> usize {
        self.per_page as usize
    }

    /// Items before this page (at most 999,900).
    pub fn offset(self) -> usize {
        (self.page as usize - 1) * self.per_page as usize
    }

    /// The previous page, if any.
    pub fn prev(self) -> Option<usize> {
        (self.page > 1).then(|| self.page as usize - 1)
    }

    /// The next page, if this one is not the last served.
    pub fn next(self) -> Option<usize> {
        (self.page < MAX_PAGE).then(|| self.page as usize + 1)
    }

    /// The last page of a list of `total` items (at least 1, at most
    /// [`MAX_PAGE`]).
    pub fn last(self, total: usize) -> usize {
        total
            .div_ceil(self.per_page as usize)
            .clamp(1, MAX_PAGE as usize)
    }

    /// This page of `items`.
    pub fn slice<T>(self, items: impl IntoIterator<Item = T>) -> impl Iterator<Item = T> {
        items.into_iter().skip(self.offset()).take(self.per_page())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_parsing_takes_whole_numbers_in_range_only() {
        let ok = Pagination::parse(Some("3"), Some("50"), 30).unwrap();
        assert_eq!((ok.page(), ok.per_page(), ok.offset()), (3, 50, 100));
        let default = Pagination::parse(None, None, 30).unwrap();
        assert_eq!((default.page(), default.per_page()), (1, 30));
        let last = Pagination::parse(Some("10000"), Some("100"), 30).unwrap();
        assert_eq!(last.offset(), 999_900);
        assert_eq!(last.next(), None);
        for bad in [
            "0",
            "-1",
            "1.5",
            "",
            " 2",
            "10001",
            "18446744073709551615",
            "99999999999999999999999",
            "x",
            "+5",
            "5 ",
            "0x10",
        ] {
            assert_eq!(
                Pagination::parse(Some(bad), None, 30),
                Err(PaginationError::Page(bad.into())),
                "page {bad:?}"
            );
        }
        assert_eq!(Pagination::parse(Some("007"), None, 30).unwrap().page(), 7);
        for bad in ["0", "101", "18446744073709551615", "ten", "+50"] {
            assert_eq!(
                Pagination::parse(None, Some(bad), 30),
                Err(PaginationError::PerPage(bad.into())),
                "per_page {bad:?}"
            );
        }
        assert_eq!(
            PaginationError::Page("0".into()).to_string(),
            "page must be a whole number from 1 to 10000, got \"0\""
        );
    }

    #[test]
    fn lenient_parsing_turns_anything_else_into_page_one() {
        for (text, page) in [
            (Some("2"), 2),
            (Some("10000"), 10_000),
            (Some("10001"), 1),
            (Some("18446744073709551615"), 1),
            (Some("0"), 1),
            (Some("abc"), 1),
            (Some("+3"), 1),
            (None, 1),
        ] {
            assert_eq!(Pagination::lenient(text, 30).page(), page, "{text:?}");
        }
    }

    #[test]
    fn pages_of_a_list() {
        let page = Pagination::new(2, 3).unwrap();
        assert_eq!(page.slice(1..=10).collect::<Vec<_>>(), vec![4, 5, 6]);
        assert_eq!(page.last(10), 4);
        assert_eq!(page.last(0), 1);
        assert_eq!(page.prev(), Some(1));
        assert_eq!(Pagination::first(0).per_page(), 1);
        assert_eq!(Pagination::first(1000).per_page(), 100);
        assert_eq!(Pagination::new(0, 3), None);
        assert_eq!(Pagination::new(u64::MAX, 3), None);
        // The last page of a huge list is still a page that can be served.
        assert_eq!(Pagination::new(1, 1).unwrap().last(usize::MAX), 10_000);
    }
}
