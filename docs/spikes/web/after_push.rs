//! `--after-push N`: the first view of each page right after a push. Each
//! round makes one commit on `main` (three files, one of them in the deep
//! directory), pushes it to vole and, as soon as the push is acknowledged,
//! asks vole, then cgit (which reads the same repo), for the root tree,
//! the deep tree and the new commit's page, once each: the first view of
//! each at the new commit. vole's tree pages must show the complete
//! last-commit column (the root's `bin/` names `commit 0`, no "older than"
//! cell) and the new commit as the deep file's. Prints `after_push
//! page=.. round=.. vole_ms=.. cgit_ms=..` and the median ratio a page.

use std::io::Write;
use std::path::Path;

use crate::common::{git, median, sh};
use crate::fixture::{fast_import, file_path, timed};

pub fn after_pushes(work: &Path, ports: [u16; 2], rounds: usize, files: usize, flat: bool) {
    let deep = if flat { "src" } else { "src/m3/n4" };
    let mut ratios: Vec<(&str, Vec<f64>)> = ["root-tree", "deep-tree", "commit"]
        .iter()
        .map(|p| (*p, Vec::new()))
        .collect();
    for round in 0..rounds {
        // The deep directory's file 43, and two others.
        let touched = [
            format!("{deep}/file43.rs"),
            file_path((round * 13 + 5) % files, flat),
            file_path((round * 29 + 11) % files, flat),
        ];
        let subject = format!("after-push round {round}");
        fast_import(work, &["--quiet"], |input: &mut dyn Write| {
            write!(
                input,
                "commit refs/heads/main\ncommitter b <b@example.org> {} +0000\ndata {}\n{subject}\nfrom refs/heads/main^0\n",
                1_800_000_000 + round,
                subject.len() + 1
            )
            .unwrap();
            for path in &touched {
                let text = format!("// {subject}\npub fn round() -> u64 {{ {round} }}\n");
                write!(
                    input,
                    "M 100644 inline {path}\ndata {}\n{text}\n",
                    text.len()
                )
                .unwrap();
            }
        });
        let head = sh(git(work).args(["rev-parse", "main"]));
        sh(git(work).args([
            "push",
            "-q",
            &format!("http://127.0.0.1:{}/bench/big.git", ports[0]),
            "main",
        ]));
        // (page, vole path, vole must show, cgit path, cgit must show)
        let pages = [
            (
                "root-tree",
                "/bench/big/-/tree/main".to_string(),
                ">commit 0</a>",
                "/cgit/big/tree/".to_string(),
                "src",
            ),
            (
                "deep-tree",
                format!("/bench/big/-/tree/main/{deep}"),
                subject.as_str(),
                format!("/cgit/big/tree/{deep}"),
                "file43.rs",
            ),
            (
                "commit",
                format!("/bench/big/-/commit/{head}"),
                subject.as_str(),
                format!("/cgit/big/commit/?id={head}"),
                subject.as_str(),
            ),
        ];
        for (at, (page, vole_path, vole_shows, cgit_path, cgit_shows)) in pages.iter().enumerate() {
            let vole_url = format!("http://127.0.0.1:{}{vole_path}", ports[0]);
            let vole_ms = timed(std::slice::from_ref(&vole_url), vole_shows)[0];
            if *page != "commit" {
                let body = fetch(&vole_url);
                assert!(
                    !body.contains("older than"),
                    "{page}: drawn with an incomplete last-commit column"
                );
            }
            let cgit_url = format!("http://127.0.0.1:{}{cgit_path}", ports[1]);
            let cgit_ms = timed(std::slice::from_ref(&cgit_url), cgit_shows)[0];
            println!(
                "after_push page={page} round={round} vole_ms={vole_ms:.3} cgit_ms={cgit_ms:.3}"
            );
            ratios[at].1.push(vole_ms / cgit_ms);
        }
    }
    for (page, values) in ratios {
        let (low, high) = values
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), v| (l.min(*v), h.max(*v)));
        println!(
            "after_push_ratio page={page} median={:.3} min={low:.3} max={high:.3}",
            median(values.clone())
        );
    }
}

fn fetch(url: &str) -> String {
    let out = std::process::Command::new("curl")
        .args(["-s", url])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}
