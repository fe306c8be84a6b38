//! Link the static libchatparse built by native/CMakeLists.txt, and its one dependency, PCRE2.
//!
//! CHATPARSE_LIB_DIR names the directory holding libchatparse.a (absolute, or relative to the checkout's root);
//! by default build/native of this checkout, where `cmake -S native -B build/native` builds it.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest.join("../../..");
    let dir = match env::var_os("CHATPARSE_LIB_DIR") {
        Some(d) => root.join(d), // an absolute path replaces the root
        None => root.join("build/native"),
    };
    let lib = dir.join("libchatparse.a");
    if !lib.is_file() {
        panic!(
            "no {}: build the library first (cmake -S native -B build/native && cmake --build build/native), \
             or set CHATPARSE_LIB_DIR to the directory holding libchatparse.a",
            lib.display()
        );
    }
    println!("cargo:rerun-if-env-changed=CHATPARSE_LIB_DIR");
    println!("cargo:rerun-if-changed={}", lib.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=static=chatparse");

    // PCRE2 (libpcre2-dev): its library directory from pkg-config when pkg-config knows one beyond the default.
    if let Ok(out) = Command::new("pkg-config")
        .args(["--libs-only-L", "libpcre2-8"])
        .output()
    {
        if out.status.success() {
            for flag in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Some(path) = flag.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={path}");
                }
            }
        }
    }
    println!("cargo:rustc-link-lib=pcre2-8");
    println!("cargo:rustc-link-lib=m");
}
