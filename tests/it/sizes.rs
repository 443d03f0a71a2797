//! No file of the server's code over 600 lines and no function over 100,
//! counting what is not test code: an item under `#[cfg(test)]` (an
//! inline test module, a test helper) is left out, and so are test modules
//! in files of their own (`tests.rs`), everything under a crate's `tests/`
//! and the harnesses under `docs/spikes/`. The
//! counts are of lines as written (comments and blank lines included), the
//! braces matched on the code alone (comments and string literals blanked
//! by the layering test's reader).

use std::path::{Path, PathBuf};

use crate::layering::{code_lines, rust_files};

const MAX_FILE_LINES: usize = 600;
const MAX_FUNCTION_LINES: usize = 100;

/// What one file holds, test items left out: its line count and each
/// function's name, first line (1-based) and length.
struct Sizes {
    lines: usize,
    functions: Vec<(String, usize, usize)>,
}

/// The line that closes the item opening at `start`: the one whose `}`
/// matches its first `{`, or the line ending in `;` before any `{`.
fn item_end(code: &[String], start: usize) -> usize {
    let mut depth = 0i64;
    let mut opened = false;
    for (i, line) in code.iter().enumerate().skip(start) {
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                ';' if !opened && depth == 0 => return i,
                _ => {}
            }
            if opened && depth == 0 {
                return i;
            }
        }
    }
    code.len().saturating_sub(1)
}

/// The name of the function a line of code declares, if it does.
fn declared_fn(line: &str) -> Option<String> {
    let mut words = line.split(|c: char| !(c.is_alphanumeric() || c == '_'));
    words.find(|w| *w == "fn")?;
    let rest = line.split_once("fn ")?.1.trim_start();
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    // `fn(u32) -> u32` is a type, not a declaration.
    (!name.is_empty() && (line.trim_start().starts_with("fn ") || line.contains(" fn ")))
        .then_some(name)
}

fn sizes(text: &str) -> Sizes {
    let code = code_lines(text);
    let mut test_code = vec![false; code.len()];
    let mut i = 0;
    while i < code.len() {
        if code[i].trim() == "#[cfg(test)]" {
            let end = item_end(&code, i + 1);
            test_code[i..=end].iter_mut().for_each(|t| *t = true);
            i = end + 1;
        } else {
            i += 1;
        }
    }
    let counted = |from: usize, to: usize| (from..=to).filter(|&l| !test_code[l]).count();
    let last = code.iter().rposition(|l| !l.trim().is_empty()).unwrap_or(0);
    let mut functions = Vec::new();
    for (at, line) in code.iter().enumerate() {
        if test_code[at] {
            continue;
        }
        if let Some(name) = declared_fn(line) {
            let end = item_end(&code, at);
            functions.push((name, at + 1, counted(at, end)));
        }
    }
    Sizes {
        lines: counted(0, last),
        functions,
    }
}

fn server_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let src = entry.path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    files.sort();
    files
}

#[test]
fn no_file_is_over_600_lines_and_no_function_over_100_but_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = server_files();
    let mut too_long = Vec::new();
    let mut functions = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        // A test module in a file of its own (`#[cfg(test)] mod tests;`).
        if file.ends_with("tests.rs") {
            continue;
        }
        let sizes = sizes(&text);
        let shown = file.strip_prefix(root).unwrap().display();
        if sizes.lines > MAX_FILE_LINES {
            too_long.push(format!("{shown}: {} lines", sizes.lines));
        }
        for (name, line, length) in &sizes.functions {
            if *length > MAX_FUNCTION_LINES {
                too_long.push(format!("{shown}:{line}: fn {name}, {length} lines"));
            }
        }
        functions += sizes.functions.len();
    }
    // Anti-vacuity: the walk saw the server's code.
    assert!(files.len() > 100, "only {} files found", files.len());
    assert!(functions > 1000, "only {functions} functions found");
    assert!(
        too_long.is_empty(),
        "over {MAX_FILE_LINES} lines a file or {MAX_FUNCTION_LINES} a function (split along jobs):\n{}",
        too_long.join("\n")
    );
}

#[test]
fn the_counter_leaves_test_items_out_and_reads_braces_in_code_only() {
    let body = "    let x = 1;\n".repeat(101);
    let text = format!(
        "//! A file.\n\nfn long() {{\n{body}}}\n\nfn short(s: &str) -> &str {{\n    \"{{ not a brace\"\n}}\n\n\
         #[cfg(test)]\nmod tests {{\n    fn helper() {{\n{body}    }}\n}}\n"
    );
    let sizes = sizes(&text);
    let names: Vec<_> = sizes.functions.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(
        names,
        ["long", "short"],
        "the test module's helper is left out"
    );
    assert_eq!(
        sizes.functions[0].2, 103,
        "fn long: its line, 101, its brace"
    );
    assert_eq!(
        sizes.functions[1].2, 3,
        "a brace in a string closes nothing"
    );
    assert_eq!(
        sizes.lines,
        1 + 1 + 103 + 1 + 3 + 1,
        "up to the test module"
    );
}
