//! `kernel-reader <path/to/kernel.rs>`: print the entry signatures of a cutile-rs kernel file as JSON.
//! `kernel-reader --contents <file.rs | ->`: print the macros, paths, attributes and outside-reaching
//! items of a Rust file (`contents.rs`), for agent-d's check of the files it generates.
//! `kernel-reader --exports <file.rs | ->`: print the `extern "C"` functions of a Rust file
//! (`exports.rs`), for `agent-d check` of a port's own ffi.rs.
//!
//! Exit status: 0 with a report on stdout; 2 with an error object on stdout (unreadable file,
//! Rust syntax error, no `#[cutile::module]`, internal fault); 64 on bad usage (message on stderr).
//! The output format is described in `docs/reader-schema.md`.

mod allow;
mod blockid;
mod contents;
mod dataflow;
mod exports;
mod json;
mod model;
mod nesting;
mod parse;
mod text;

use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;

use model::Failure;

const STACK_BYTES: usize = 512 << 20;

fn run(path: &str) -> Result<model::Report, Failure> {
    let source = std::fs::read_to_string(path)
        .map_err(|e| Failure::nowhere(format!("cannot read {path}: {e}")))?;
    if let Err((line, depth)) = nesting::check(&source, nesting::MAX_NESTING) {
        return Err(Failure {
            message: format!(
                "brackets nested deeper than {} levels (level {depth}): not read",
                nesting::MAX_NESTING
            ),
            line,
            column: 0,
        });
    }
    parse::read_kernel(&source)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if args.len() == 2 && args[0] == "--contents" {
        return print_source_report(&args[1], contents::contents);
    }
    if args.len() == 2 && args[0] == "--exports" {
        return print_source_report(&args[1], exports::exports);
    }
    if args.len() != 1 || args[0].starts_with('-') {
        eprintln!(
            "usage: kernel-reader <path/to/kernel.rs> | kernel-reader --contents <file.rs> | kernel-reader --exports <file.rs>"
        );
        return ExitCode::from(64);
    }
    let path = args[0].clone();

    // Silence the default panic message: a panic becomes an error object on stdout.
    panic::set_hook(Box::new(|_| {}));
    // A big stack for deeply nested sources; the parser and the walkers recurse.
    let worker_path = path.clone();
    let worker = std::thread::Builder::new()
        .stack_size(STACK_BYTES)
        .spawn(move || panic::catch_unwind(AssertUnwindSafe(|| run(&worker_path))));
    let caught = match worker {
        Ok(handle) => handle.join().unwrap_or_else(Err),
        Err(_) => panic::catch_unwind(AssertUnwindSafe(|| run(&path))),
    };
    let outcome = caught.unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(ToString::to_string)
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        Err(Failure::nowhere(format!(
            "internal error in kernel-reader: {what}"
        )))
    });

    let (value, code) = match outcome {
        Ok(report) => (json::report(&path, &report), 0),
        Err(failure) => (json::failure(&path, &failure), 2),
    };
    let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| "{}".to_string());
    // A closed stdout is not worth a panic.
    let _ = writeln!(std::io::stdout().lock(), "{text}");
    ExitCode::from(code)
}

fn print_source_report(
    path: &str,
    read_source: fn(&str) -> Result<serde_json::Value, String>,
) -> ExitCode {
    // `-`: the text on stdin (agent-d checks a file before it is written anywhere)
    let read = if path == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map(|_| text)
    } else {
        std::fs::read_to_string(path)
    };
    let outcome = read
        .map_err(|e| format!("cannot read {path}: {e}"))
        .and_then(|source| read_source(&source));
    let (value, code) = match outcome {
        Ok(value) => (value, 0),
        Err(message) => (serde_json::json!({ "error": message }), 2),
    };
    let text = serde_json::to_string(&value).unwrap_or_else(|_| "{}".to_string());
    let _ = writeln!(std::io::stdout().lock(), "{text}");
    ExitCode::from(code)
}
