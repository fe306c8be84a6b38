//! `cargo test`: run the example through native/examples/check_example.py, which compares each feed's events
//! and the message with Python's chatparse at test time (CHATPARSE_PYTHON names the Python that imports
//! chatparse; python3 by default).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn check(args: &[&str]) {
    let root = root();
    let python = std::env::var("CHATPARSE_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .current_dir(&root)
        .arg("native/examples/check_example.py")
        .args(args)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_stream"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "check_example.py {args:?}:\n{text}");
}

#[test]
fn qwen3_reasoning_and_tool_call_fed_3_bytes_at_a_time() {
    check(&[
        "--template",
        "qwen3",
        "--tables",
        "tests/vectors/qwen3.cpt",
        "--prompt",
        "docs/examples/prompt.txt",
        "--output",
        "docs/examples/output.txt",
        "--chunk",
        "3",
    ]);
}

#[test]
fn utf8_characters_split_across_feeds() {
    check(&[
        "--template",
        "qwen3",
        "--tables",
        "tests/vectors/qwen3.cpt",
        "--case",
        "tests/real_outputs/qwen3.json:qwen3-sglang-chinese-args",
        "--chunk",
        "1",
        "--chunk",
        "2",
        "--chunk",
        "5",
    ]);
}

#[test]
fn token_ids_with_the_prompt_as_ids() {
    check(&[
        "--template",
        "qwen3",
        "--tables",
        "tests/vectors/qwen3.tok-bl.cpt",
        "--case",
        "tests/vectors/qwen3.tok-bl.json:qwen3-0/ids",
        "--chunk",
        "1",
        "--chunk",
        "3",
    ]);
}

#[test]
fn a_token_id_out_of_range_fails_as_in_python() {
    check(&[
        "--template",
        "qwen3",
        "--tables",
        "tests/vectors/qwen3.tok-bl.cpt",
        "--case",
        "tests/vectors/qwen3.tok-bl.json:qwen3-out-of-range",
    ]);
}

#[test]
fn refuses_corrupted_tables_as_python_does() {
    check(&[
        "--expect-refused",
        "--tables",
        "tests/vectors/invalid/checksum.cpt",
        "--output",
        "docs/examples/output.txt",
    ]);
}
