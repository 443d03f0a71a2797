//! The progress bar of long CLI commands (backup, restore).

/// A progress bar in bytes on a terminal (indicatif), nothing otherwise.
pub(super) struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    pub(super) fn new(what: &'static str) -> Progress {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = indicatif::ProgressBar::new(0);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} [{bar:40}] {bytes}/{total_bytes} ({eta})",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what);
        Progress(Some(bar))
    }

    pub(super) fn set(&mut self, done: u64, total: u64) {
        if let Some(bar) = &self.0 {
            bar.set_length(total);
            bar.set_position(done);
        }
    }

    pub(super) fn finish(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }
}
