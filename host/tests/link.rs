//! The link settings of first-party artifacts (crate `xprof-link`): the GNU unwinder linked
//! statically rather than `libgcc_s` loaded, and packed relative relocations. A panic inside a
//! tool must still be caught on the plugin's side of the ABI and reported as an internal error,
//! in a plugin built that way (core) and in one built the stock way (example-vendor), loaded
//! side by side in one host.

mod common;

use std::path::Path;

use common::*;

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// Runs `argv` with the panic failpoint armed for `tool`; returns (exit code, error JSON).
fn panicking(tool: &str, argv: &[&str]) -> (Option<i32>, serde_json::Value) {
    let cache = tempfile::tempdir().unwrap();
    let out = xprof(cache.path())
        .args(["--no_cache"])
        .args(argv)
        .env("XPROF_FAILPOINT_PANIC", tool)
        .output()
        .unwrap();
    // The error is the last line on stderr (cache trace lines come first).
    let text = String::from_utf8_lossy(&out.stderr);
    let last = text.lines().last().unwrap_or_default();
    let err = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {text}"));
    (out.status.code(), err)
}

#[test]
fn a_panic_in_a_statically_unwound_plugin_is_an_internal_error() {
    let fixture = workspace_root().join("fixtures/jax-cpu/logdir");
    let (code, err) = panicking("get_hosts", &["get_hosts", fixture.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("tool `get_hosts` panicked: failpoint XPROF_FAILPOINT_PANIC"),
        "{msg}"
    );
}

#[test]
fn a_panic_in_a_stock_plugin_beside_it_is_an_internal_error() {
    let (code, err) = panicking(
        "vendor_dump_inventory",
        &["vendor_dump_inventory", "--dump_dir", "."],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.to_string()
            .contains("tool `vendor_dump_inventory` panicked: failpoint"),
        "{err}"
    );
}

/// The link took effect wherever the toolchain has the static archive: the host executable
/// does not name `libgcc_s` at all (a needed library's name is in its dynamic string table).
#[test]
fn the_host_does_not_load_libgcc_s_when_the_static_unwinder_exists() {
    if xprof_link::static_unwinder().is_none()
        || !cfg!(all(target_os = "linux", target_env = "gnu"))
    {
        return;
    }
    let bytes = std::fs::read(xprof_bin()).unwrap();
    let needle = b"libgcc_s.so";
    assert!(
        !bytes.windows(needle.len()).any(|w| w == needle),
        "{} still names libgcc_s",
        xprof_bin()
    );
    for so in std::fs::read_dir(plugin_dir()).unwrap().flatten() {
        let name = so.file_name().to_string_lossy().into_owned();
        let names_it = std::fs::read(so.path())
            .unwrap()
            .windows(needle.len())
            .any(|w| w == needle);
        // The example vendor plugin is built the stock way on purpose.
        assert_eq!(names_it, name.contains("example_vendor"), "{name}");
    }
}

/// Where the toolchain can, the host and the first-party plugins carry their relative
/// relocations packed (a `.relr.dyn` section) rather than as RELA records.
#[test]
fn first_party_artifacts_pack_their_relative_relocations_when_the_toolchain_can() {
    if !xprof_link::packed_relocations() || !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let needle = b".relr.dyn";
    let has = |p: &Path| {
        std::fs::read(p)
            .unwrap()
            .windows(needle.len())
            .any(|w| w == needle)
    };
    assert!(has(Path::new(xprof_bin())), "{}", xprof_bin());
    for so in std::fs::read_dir(plugin_dir()).unwrap().flatten() {
        let name = so.file_name().to_string_lossy().into_owned();
        assert_eq!(has(&so.path()), !name.contains("example_vendor"), "{name}");
    }
}
