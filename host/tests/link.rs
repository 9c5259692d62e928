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

/// Whether the file at `path` holds the bytes `needle`.
fn holds(path: &Path, needle: &[u8]) -> bool {
    std::fs::read(path)
        .unwrap()
        .windows(needle.len())
        .any(|w| w == needle)
}

/// The host and every first-party plugin hold `needle` exactly when `first_party` says so; the
/// example vendor plugin, built the stock way on purpose, the other way round.
fn assert_artifacts_hold(needle: &[u8], first_party: bool) {
    let what = String::from_utf8_lossy(needle);
    assert_eq!(
        holds(Path::new(xprof_bin()), needle),
        first_party,
        "{} / {what}",
        xprof_bin()
    );
    for so in std::fs::read_dir(plugin_dir()).unwrap().flatten() {
        let name = so.file_name().to_string_lossy().into_owned();
        let stock = name.contains("example_vendor");
        assert_eq!(
            holds(&so.path(), needle),
            first_party != stock,
            "{name} / {what}"
        );
    }
}

/// The link took effect wherever the toolchain has the static archive: the artifacts do not
/// name `libgcc_s` at all (a needed library's name is in the dynamic string table).
#[test]
fn the_host_does_not_load_libgcc_s_when_the_static_unwinder_exists() {
    if xprof_link::static_unwinder().is_none()
        || !cfg!(all(target_os = "linux", target_env = "gnu"))
    {
        return;
    }
    assert_artifacts_hold(b"libgcc_s.so", false);
}

/// Where the toolchain can, the host and the first-party plugins carry their relative
/// relocations packed (a `.relr.dyn` section) rather than as RELA records.
#[test]
fn first_party_artifacts_pack_their_relative_relocations_when_the_toolchain_can() {
    if !xprof_link::packed_relocations() || !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    assert_artifacts_hold(b".relr.dyn", true);
}

/// Where the linker takes a symbol ordering file, the host and the core plugin lay out the
/// functions of their `symbol-order.txt` in the list's order. (The lists name release symbols;
/// a test build defines the standard library's among them under the same names, as long as the
/// toolchain is the one the lists were made with.)
#[test]
fn first_party_artifacts_lay_out_their_hot_functions_in_list_order_when_the_linker_can() {
    if !xprof_link::symbol_ordering() || !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let mut artifacts = vec![(
        Path::new(xprof_bin()).to_path_buf(),
        workspace_root().join("host"),
    )];
    for so in std::fs::read_dir(plugin_dir()).unwrap().flatten() {
        let name = so.file_name().to_string_lossy().into_owned();
        let Some(plugin) = name
            .strip_prefix("libxprof_plugin_")
            .and_then(|n| n.strip_suffix(".so"))
        else {
            continue;
        };
        let dir = workspace_root().join("plugins").join(plugin);
        if dir.join(xprof_link::ORDER_FILE).is_file() {
            artifacts.push((so.path(), dir));
        }
    }
    // The host and the core plugin (the plugins the tests build; see `common::plugin_dir`).
    assert_eq!(artifacts.len(), 2, "{artifacts:?}");
    for (artifact, dir) in artifacts {
        let Some(defined) = xprof_link::defined_functions(&artifact) else {
            eprintln!("skipped: `nm` (binutils) is not available");
            return;
        };
        let list = std::fs::read_to_string(dir.join(xprof_link::ORDER_FILE)).unwrap();
        let addrs: Vec<u64> = xprof_link::listed_symbols(&list)
            .filter_map(|n| defined.get(n).copied())
            .collect();
        let shown = artifact.display();
        if addrs.len() < 50 {
            // The list's names carry the toolchain's hashes: on another toolchain it is stale,
            // which costs speed only (the linker skips what it does not find).
            eprintln!(
                "skipped {shown}: only {} listed functions in this build; the list is stale \
                 for this toolchain (`cargo xtask symbol-order` rewrites it)",
                addrs.len()
            );
            continue;
        }
        let out_of_order = addrs.windows(2).filter(|w| w[0] >= w[1]).count();
        assert_eq!(out_of_order, 0, "{shown}: {} functions", addrs.len());
    }
}
