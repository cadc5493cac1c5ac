//! Standard output for the CLI. `println!` panics when the reader has gone away (`linerate show
//! ip route | head -1`); a Unix tool ends quietly instead. Every line the CLI prints goes through
//! `outln!` or `out!`, which end the program with the status a shell gives a process killed by
//! SIGPIPE (128 + 13), saying nothing, when standard output is a closed pipe.
//!
//! Not done with SIGPIPE itself: the daemon and the tester write to sockets, where a peer that
//! closes must be an error to handle, not the end of the process.

use std::cell::RefCell;
use std::fmt;
use std::io::{self, Write};

thread_local! {
    /// Where this thread's output goes instead of standard output, while [`capture`] runs.
    static CAPTURE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f` with everything it prints kept in a string instead (the event manager's commands,
/// `| include` filters): returns what `f` returned and what it printed.
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, String) {
    let outer = CAPTURE.with(|c| c.borrow_mut().replace(String::new()));
    let r = f();
    let text = CAPTURE.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer));
    (r, text.unwrap_or_default())
}

/// Appends to the capture buffer if one is active; false when output goes to stdout.
fn captured(args: fmt::Arguments<'_>, newline: bool) -> bool {
    CAPTURE.with(|c| match &mut *c.borrow_mut() {
        Some(buf) => {
            let _ = fmt::Write::write_fmt(buf, args);
            if newline {
                buf.push('\n');
            }
            true
        }
        None => false,
    })
}

/// The exit status of a process that SIGPIPE ended, as shells report it.
pub const BROKEN_PIPE_STATUS: i32 = 128 + 13;

/// Writes `args` to standard output; on a closed pipe, exits quietly.
pub fn write(args: fmt::Arguments<'_>) {
    if captured(args, false) {
        return;
    }
    let mut o = io::stdout().lock();
    if let Err(e) = o.write_fmt(args) {
        fail(e);
    }
}

/// Writes `args` and a newline, flushing at the newline (as `println!` does).
pub fn line(args: fmt::Arguments<'_>) {
    if captured(args, true) {
        return;
    }
    let mut o = io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|()| o.write_all(b"\n")) {
        fail(e);
    }
}

/// Flushes what `out!` left without a newline; on a closed pipe, exits quietly.
pub fn flush() {
    if let Err(e) = io::stdout().lock().flush() {
        fail(e);
    }
}

fn fail(e: io::Error) -> ! {
    if e.kind() == io::ErrorKind::BrokenPipe {
        std::process::exit(BROKEN_PIPE_STATUS);
    }
    eprintln!("linerate: cannot write to standard output: {e}");
    std::process::exit(74); // EX_IOERR
}

/// `println!` for the CLI: see the module's comment.
macro_rules! outln {
    () => { $crate::out::line(format_args!("")) };
    ($($arg:tt)*) => { $crate::out::line(format_args!($($arg)*)) };
}

/// `print!` for the CLI: see the module's comment.
macro_rules! out {
    ($($arg:tt)*) => { $crate::out::write(format_args!($($arg)*)) };
}
