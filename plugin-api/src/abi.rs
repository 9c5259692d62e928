//! The frozen ABI. Read the module docs of the crate before touching anything here.

use abi_stable::{
    StableAbi, declare_root_module_statics,
    library::RootModule,
    package_version_strings,
    sabi_types::VersionStrings,
    std_types::{RResult, RStr, RString},
};

/// Version of the JSON protocol spoken through [`PluginMod`]. The host refuses a plugin
/// whose `abi_info().protocol` it does not understand; additions that old hosts can ignore
/// do not bump it.
pub const PROTOCOL: u32 = 1;

/// The root module every plugin exports.
///
/// * `abi_info()` → JSON object `{"name", "version", "protocol", "capabilities": [..]}`.
/// * `descriptors()` → JSON array of tool descriptors (see [`crate::sdk::Tool`]).
/// * `invoke(name, args_json, ctx_json)` → `ROk(envelope)` with
///   `{"result", "content_type", "inputs": [{"path", "kind": "file"|"dir"}]}`, or `RErr(error)`
///   with `{"kind", "message", "hint"}`. Plugins must be `Sync`: `invoke` may be called from
///   several threads at once.
///
/// Evolution rule: new fields go *below* `invoke` and move `last_prefix_field` only at a
/// major bump of this crate — and since a new field breaks every older plugin, prefer JSON.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModRef)))]
#[sabi(missing_field(panic))]
pub struct PluginMod {
    pub abi_info: extern "C" fn() -> RString,
    pub descriptors: extern "C" fn() -> RString,
    #[sabi(last_prefix_field)]
    pub invoke: extern "C" fn(RStr<'_>, RStr<'_>, RStr<'_>) -> RResult<RString, RString>,
}

impl RootModule for PluginModRef {
    declare_root_module_statics! {PluginModRef}
    const BASE_NAME: &'static str = "xprof_plugin";
    const NAME: &'static str = "xprof_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
