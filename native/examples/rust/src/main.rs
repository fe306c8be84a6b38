//! stream TABLES.cpt OUTPUT [--prompt FILE] [--tools FILE] [--chunk N] [--vllm]
//! stream TABLES.cpt OUTPUT --ids [--prompt FILE | --prompt-ids FILE] [--tools FILE] [--chunk N] [--vllm]
//!
//! Loads a compiled response template (a `.cpt` file, e.g. from `chatparse compile DIR`), feeds the output
//! (a file, or - for standard input) N bytes at a time (3 by default, so multi-byte UTF-8 characters are
//! split across feeds on purpose), and prints each feed's events, the final events and the message:
//!
//! ```text
//! initial: [...]
//! feed 1 (3 bytes): [...]
//! final: [...]
//! message: {"role":"assistant",...}
//! ```
//!
//! With --ids, OUTPUT (and --prompt-ids) hold token ids (integers separated by spaces or commas, a JSON list
//! will do), fed N ids at a time to a parser over the tables' token section (Python's TokenParser).
//!
//! Events and the message are JSON text, exactly as Python's chatparse gives them. Any error is printed as
//! `error: <Python class>: <message>` on standard error with exit status 1 (2 for a usage error).

mod chatparse;
mod ffi;

use std::io::{self, Read, Write};
use std::process::ExitCode;

use chatparse::{Dialect, Error, Parser, Prompt, Tables};

const USAGE: &str = "\
usage: stream TABLES.cpt OUTPUT [--prompt FILE] [--tools FILE] [--chunk N] [--vllm]
       stream TABLES.cpt OUTPUT --ids [--prompt FILE | --prompt-ids FILE] [--tools FILE] [--chunk N] [--vllm]
  OUTPUT is a file of the model's output (- for standard input), fed N bytes at a time (3);
  with --ids, a file of token ids, fed N ids at a time";

struct Args {
    tables: String,
    output: String,
    prompt: Option<String>,
    prompt_ids: Option<String>,
    ids: bool,
    tools: Option<String>,
    chunk: usize,
    dialect: Dialect,
}

fn parse_args() -> Result<Args, String> {
    let mut positional = Vec::new();
    let (mut prompt, mut prompt_ids, mut ids, mut tools) = (None, None, false, None);
    let (mut chunk, mut dialect) = (3usize, Dialect::Transformers);
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--prompt" => prompt = Some(it.next().ok_or("--prompt needs a file")?),
            "--prompt-ids" => prompt_ids = Some(it.next().ok_or("--prompt-ids needs a file")?),
            "--ids" => ids = true,
            "--tools" => tools = Some(it.next().ok_or("--tools needs a file")?),
            "--chunk" => {
                let n = it.next().ok_or("--chunk needs a number")?;
                chunk = n
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or("--chunk takes a positive number")?;
            }
            "--vllm" => dialect = Dialect::Vllm,
            a if a.len() > 1 && a.starts_with('-') => return Err(format!("unknown option {a}")),
            _ => positional.push(arg),
        }
    }
    let [tables, output]: [String; 2] = positional
        .try_into()
        .map_err(|_| "TABLES.cpt and OUTPUT are required".to_string())?;
    if prompt_ids.is_some() && (!ids || prompt.is_some()) {
        return Err("--prompt-ids goes with --ids, instead of --prompt".into());
    }
    Ok(Args {
        tables,
        output,
        prompt,
        prompt_ids,
        ids,
        tools,
        chunk,
        dialect,
    })
}

fn read(path: &str) -> Result<Vec<u8>, Error> {
    let mut data = Vec::new();
    let read = if path == "-" {
        io::stdin().read_to_end(&mut data).map(|_| ())
    } else {
        std::fs::read(path).map(|d| data = d)
    };
    read.map(|_| data).map_err(|e| Error {
        exception: "OSError".into(),
        message: format!("cannot read {path}: {e}"),
    })
}

fn read_text(path: &str) -> Result<String, Error> {
    String::from_utf8(read(path)?).map_err(|e| Error {
        exception: "UnicodeDecodeError".into(),
        message: format!("{path}: {e}"),
    })
}

/// Token ids: integers separated by spaces, commas or newlines (a JSON list of them will do).
fn read_ids(path: &str) -> Result<Vec<i64>, Error> {
    read_text(path)?
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | '[' | ']'))
        .filter(|s| !s.is_empty())
        .map(str::parse::<i64>)
        .collect::<Result<_, _>>()
        .map_err(|_| Error {
            exception: "ValueError".into(),
            message: format!("{path}: not a list of token ids"),
        })
}

fn run(args: &Args) -> Result<(), Error> {
    // A prompt is what the model continued; "" opts out of cutting at the template's start anchor.
    let prompt = args.prompt.as_deref().map(read_text).transpose()?.unwrap_or_default();
    let tools = args.tools.as_deref().map(read_text).transpose()?;
    let tables = Tables::load(&read(&args.tables)?)?;

    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let io_error = |e: io::Error| Error {
        exception: "OSError".into(),
        message: e.to_string(),
    };
    let mut parser = if args.ids {
        let ids = read_ids(&args.output)?;
        let prompt_ids = args.prompt_ids.as_deref().map(read_ids).transpose()?;
        let prompt = prompt_ids.as_deref().map_or(Prompt::Text(&prompt), Prompt::Ids);
        let mut parser = Parser::new_ids(&tables, prompt, tools.as_deref(), args.dialect)?;
        writeln!(out, "initial: {}", parser.initial_events()).map_err(io_error)?;
        for (i, piece) in ids.chunks(args.chunk).enumerate() {
            let events = parser.feed_ids(piece)?;
            writeln!(out, "feed {} ({} ids): {}", i + 1, piece.len(), events).map_err(io_error)?;
        }
        parser
    } else {
        let output = read(&args.output)?;
        let mut parser = Parser::new(&tables, &prompt, tools.as_deref(), args.dialect)?;
        writeln!(out, "initial: {}", parser.initial_events()).map_err(io_error)?;
        for (i, piece) in output.chunks(args.chunk).enumerate() {
            let events = parser.feed(piece)?;
            writeln!(out, "feed {} ({} bytes): {}", i + 1, piece.len(), events).map_err(io_error)?;
        }
        parser
    };
    let (events, message) = parser.finalize()?;
    writeln!(out, "final: {events}").map_err(io_error)?;
    writeln!(out, "message: {message}").map_err(io_error)?;
    out.flush().map_err(io_error)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(why) => {
            eprintln!("error: {why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = io::stdout().flush();
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
