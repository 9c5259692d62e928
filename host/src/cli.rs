//! The command line, generated from the registry.
//!
//! Parsing happens in two phases: the host's own flags (plugin discovery, output format,
//! cache control) are taken out of argv first, wherever they stand; then plugins load, and only
//! the invoked tool's clap command is built from its parameter schema, so start-up does not pay
//! for every tool's parser.

use clap::{Arg, ArgAction, Command};
use serde_json::{Map, Value};

use crate::registry::ToolEntry;

/// Flags the host owns (they are not tool parameters).
#[derive(Clone, Debug, Default)]
pub struct GlobalOpts {
    pub plugin_dirs: Vec<std::path::PathBuf>,
    pub no_default_plugin_dirs: bool,
    pub format: Option<String>,
    pub verbose: bool,
    pub version: bool,
    pub help: bool,
    pub no_cache: bool,
    pub bypass_cache: bool,
    pub cache_ttl: Option<String>,
    /// `--full`: no output budget (module `budget`).
    pub full: bool,
}

/// Output formats for people; JSON is the default.
/// `compact` is one line of JSON (also `--compact`).
pub const FORMATS: &[&str] = &["json", "compact", "text", "table"];

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("flag {flag} needs a value")]
    MissingValue { flag: String },
    #[error("invalid value {value:?} for {flag}: {expected}")]
    BadValue {
        flag: String,
        value: String,
        expected: String,
    },
}

fn parse_bool_flag(flag: &str, v: Option<&str>) -> Result<bool, CliError> {
    match v {
        None => Ok(true),
        Some(s) => xprof_plugin_api::sdk::parse_bool(s).ok_or_else(|| CliError::BadValue {
            flag: flag.to_string(),
            value: s.to_string(),
            expected: "true or false".into(),
        }),
    }
}

/// Take the host's flags out of `args` (kebab or snake spelling, `--f v` or `--f=v`), leaving
/// the rest in order. Everything after a literal `--` is left alone.
pub fn extract_globals(args: Vec<String>) -> Result<(GlobalOpts, Vec<String>), CliError> {
    let mut g = GlobalOpts::default();
    let mut rest = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if a == "--" {
            rest.push(a);
            rest.extend(it.by_ref());
            break;
        }
        let Some(body) = a.strip_prefix("--") else {
            if a == "-h" {
                g.help = true;
            } else if a == "-V" {
                g.version = true;
            } else {
                rest.push(a);
            }
            continue;
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n.replace('-', "_"), Some(v.to_string())),
            None => (body.replace('-', "_"), None),
        };
        let mut value = |flag: &str| -> Result<String, CliError> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it.next().ok_or_else(|| CliError::MissingValue {
                    flag: format!("--{flag}"),
                }),
            }
        };
        match name.as_str() {
            "plugin_dir" => g.plugin_dirs.push(value("plugin-dir")?.into()),
            "no_default_plugin_dirs" => {
                g.no_default_plugin_dirs = parse_bool_flag(&a, inline.as_deref())?
            }
            "format" => {
                let f = value("format")?;
                if !FORMATS.contains(&f.as_str()) {
                    return Err(CliError::BadValue {
                        flag: "--format".into(),
                        value: f,
                        expected: format!("one of {}", FORMATS.join(", ")),
                    });
                }
                g.format = Some(f);
            }
            "verbose" => g.verbose = parse_bool_flag(&a, inline.as_deref())?,
            "version" => g.version = true,
            "help" => g.help = true,
            "no_cache" => g.no_cache = parse_bool_flag(&a, inline.as_deref())?,
            "bypass_cache" => g.bypass_cache = parse_bool_flag(&a, inline.as_deref())?,
            "cache_ttl" => g.cache_ttl = Some(value("cache_ttl")?),
            "full" => g.full = parse_bool_flag(&a, inline.as_deref())?,
            "compact" => {
                if parse_bool_flag(&a, inline.as_deref())? {
                    g.format = Some("compact".into());
                }
            }
            _ => rest.push(a),
        }
    }
    Ok((g, rest))
}

fn leak(s: String) -> &'static str {
    // clap wants 'static help strings; a process builds at most one tool command.
    Box::leak(s.into_boxed_str())
}

/// Example invocation lines for help text, from the descriptor's examples.
pub fn example_lines(tool: &ToolEntry) -> Vec<String> {
    tool.example_list()
        .iter()
        .map(|ex| {
            let mut line = format!("xprof {}", tool.name);
            if let Some(args) = ex["args"].as_object() {
                if let Some(p) = args.get("path").and_then(Value::as_str) {
                    line.push(' ');
                    line.push_str(p);
                }
                for (k, v) in args {
                    if k == "path" {
                        continue;
                    }
                    match v {
                        Value::Bool(true) => line.push_str(&format!(" --{k}")),
                        Value::String(s) => line.push_str(&format!(" --{k} {}", shell_quote(s))),
                        other => line.push_str(&format!(" --{k} {other}")),
                    }
                }
            }
            format!("  # {}\n  {line}", ex["description"].as_str().unwrap_or(""))
        })
        .collect()
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=${}@%+,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The shells `xprof completions` writes scripts for.
pub const SHELLS: &[&str] = &["bash", "zsh", "fish", "elvish", "powershell"];

/// `xprof completions SHELL`: a completion script for every tool of `reg` and the host's
/// commands and flags, generated from the same clap commands the CLI parses with.
pub fn completions(
    reg: &crate::registry::Registry,
    args: &[String],
) -> Result<String, xprof_plugin_api::ToolError> {
    use clap_complete::Shell;
    let usage = || {
        xprof_plugin_api::ToolError::usage(match args.first() {
            Some(a) => format!("completions: unknown shell `{a}`"),
            None => "completions: which shell?".to_string(),
        })
        .with_hint(format!(
            "xprof completions {}; e.g. `xprof completions bash > ~/.local/share/bash-completion/completions/xprof`",
            SHELLS.join("|")
        ))
    };
    let shell: Shell = match args {
        [one] => one.parse().map_err(|_| usage())?,
        _ => return Err(usage()),
    };
    let host_flag = |name: &'static str, help: &'static str| {
        Arg::new(name)
            .long(name)
            .help(help)
            .action(ArgAction::SetTrue)
            .global(true)
    };
    let mut cmd = Command::new("xprof")
        .arg(
            Arg::new("format")
                .long("format")
                .value_parser(FORMATS.to_vec())
                .global(true)
                .help("output format"),
        )
        .arg(host_flag("full", "no 16 KB output budget"))
        .arg(host_flag("compact", "one line of JSON"))
        .arg(host_flag("no_cache", "do not use the result cache"))
        .arg(host_flag("bypass_cache", "recompute and store"))
        .arg(
            Arg::new("plugin-dir")
                .long("plugin-dir")
                .global(true)
                .value_hint(clap::ValueHint::DirPath),
        )
        .subcommand(Command::new("tools").about("list the tools"))
        .subcommand(Command::new("plugins").about("list the plugins"))
        .subcommand(Command::new("mcp").about("serve the tools over MCP"))
        .subcommand(
            Command::new("cache")
                .about("the result cache")
                .subcommand(Command::new("stats"))
                .subcommand(Command::new("clear")),
        )
        .subcommand(
            Command::new("completions")
                .about("a shell completion script")
                .arg(Arg::new("shell").value_parser(SHELLS.to_vec())),
        );
    for tool in reg.tools.values() {
        cmd = cmd.subcommand(tool_command(tool));
    }
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "xprof", &mut buf);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Build the clap command of one tool from its schema.
pub fn tool_command(tool: &ToolEntry) -> Command {
    let mut after = String::new();
    if !tool.output.is_empty() {
        after.push_str(&format!("Output: {}\n", tool.output));
    }
    let ex = example_lines(tool);
    if !ex.is_empty() {
        after.push_str("\nExamples (${FIXTURES} = the repository's fixtures/):\n");
        after.push_str(&ex.join("\n"));
        after.push('\n');
    }
    after.push_str(
        "\nHost flags: --full (no 16 KB output budget), --format json|compact|text|table, --compact, \
         --plugin-dir DIR, --no-default-plugin-dirs, --no_cache, --bypass_cache, --cache_ttl SECS, \
         --verbose",
    );
    let mut cmd = Command::new(tool.name.clone())
        .bin_name(format!("xprof {}", tool.name))
        .about(tool.summary.clone())
        .long_about(if tool.doc.is_empty() {
            tool.summary.clone()
        } else {
            tool.doc.clone()
        })
        .after_long_help(leak(after.clone()))
        .after_help(leak(after))
        .disable_help_flag(true)
        .disable_version_flag(true)
        .allow_negative_numbers(true)
        .arg(
            Arg::new("__help")
                .long("help")
                .short('h')
                .action(ArgAction::Help)
                .help("Print help"),
        );
    let required: Vec<&str> = tool.params["required"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, schema) in tool.properties() {
        let help = schema["description"].as_str().unwrap_or("").to_string();
        let help = match (schema.get("default"), schema["x-env"].as_str()) {
            (Some(d), _) if !d.is_null() => format!("{help} [default: {d}]"),
            (_, Some(env)) => format!("{help} [env: {env}]"),
            _ => help,
        };
        let positional = schema["x-positional"].as_bool().unwrap_or(false);
        let mut arg = Arg::new(name.clone()).help(help);
        if positional {
            arg = arg.index(1).value_name(name.to_uppercase());
            // The positional may also be spelled as a flag (`--path`), which agents guess.
            cmd = cmd.arg(arg.required(false));
            cmd = cmd.arg(
                Arg::new(format!("__flag_{name}"))
                    .long(name.clone())
                    .value_name(name.to_uppercase())
                    .hide(true)
                    .conflicts_with(name.clone()),
            );
            continue;
        }
        arg = arg.long(name.clone());
        if let Some(c) = schema["x-short"].as_str().and_then(|s| s.chars().next()) {
            arg = arg.short(c);
        }
        let kebab = name.replace('_', "-");
        if kebab != name {
            arg = arg.alias(kebab);
        }
        arg = match schema["type"].as_str() {
            Some("boolean") => arg
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
                .value_name("BOOL"),
            Some("array") => arg
                .action(ArgAction::Append)
                .value_delimiter(',')
                .value_name("VALUE"),
            Some("integer") => arg.value_name("INT").allow_negative_numbers(true),
            Some("number") => arg.value_name("NUM").allow_negative_numbers(true),
            _ => arg.value_name("VALUE").allow_hyphen_values(true),
        };
        if let Some(values) = schema["enum"].as_array() {
            let vals: Vec<String> = values
                .iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect();
            arg = arg.value_parser(clap::builder::PossibleValuesParser::new(vals));
        }
        if required.contains(&name.as_str()) {
            arg = arg.required(true);
        }
        cmd = cmd.arg(arg);
    }
    cmd
}

/// Turn parsed matches into the tool's JSON arguments, typed by the schema. Strings stay
/// strings (a run named `12345` is not a number); numbers and booleans are checked here so the
/// error names the flag.
pub fn matches_to_args(
    tool: &ToolEntry,
    m: &clap::ArgMatches,
) -> Result<Map<String, Value>, CliError> {
    let mut out = Map::new();
    for (name, schema) in tool.properties() {
        let positional = schema["x-positional"].as_bool().unwrap_or(false);
        let raw: Vec<String> = {
            let mut v: Vec<String> = m
                .get_many::<String>(&name)
                .map(|vals| vals.cloned().collect())
                .unwrap_or_default();
            if positional && v.is_empty() {
                v = m
                    .get_many::<String>(&format!("__flag_{name}"))
                    .map(|vals| vals.cloned().collect())
                    .unwrap_or_default();
            }
            v
        };
        if raw.is_empty() {
            continue;
        }
        let flag = format!("--{name}");
        let last = raw.last().cloned().unwrap_or_default();
        let value = match schema["type"].as_str() {
            Some("integer") => {
                let n: i64 = last.trim().parse().map_err(|_| CliError::BadValue {
                    flag: flag.clone(),
                    value: last.clone(),
                    expected: "an integer".into(),
                })?;
                Value::from(n)
            }
            Some("number") => {
                let n: f64 = last.trim().parse().map_err(|_| CliError::BadValue {
                    flag: flag.clone(),
                    value: last.clone(),
                    expected: "a number".into(),
                })?;
                serde_json::Number::from_f64(n)
                    .map(Value::Number)
                    .ok_or_else(|| CliError::BadValue {
                        flag: flag.clone(),
                        value: last.clone(),
                        expected: "a finite number".into(),
                    })?
            }
            Some("boolean") => Value::Bool(parse_bool_flag(&flag, Some(&last))?),
            Some("array") => Value::Array(raw.into_iter().map(Value::String).collect()),
            _ => Value::String(last),
        };
        out.insert(name, value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry() -> ToolEntry {
        ToolEntry {
            name: "t".into(),
            aliases: vec![],
            summary: "s".into(),
            doc: "d".into(),
            params: json!({"type": "object", "properties": {
                "path": {"type": "string", "format": "path", "x-positional": true},
                "run": {"type": "string"},
                "max_lines": {"type": "integer", "default": 10},
                "print_metadata": {"type": "boolean", "default": false},
                "ratio": {"type": "number"},
            }, "required": []})
            .into(),
            output: String::new(),
            examples: serde_json::Value::Array(vec![]).into(),
            plugin: 0,
        }
    }

    fn parse(args: &[&str]) -> Result<Map<String, Value>, String> {
        let t = entry();
        let m = tool_command(&t)
            .try_get_matches_from(std::iter::once("t").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        matches_to_args(&t, &m).map_err(|e| e.to_string())
    }

    #[test]
    fn run_names_that_look_like_numbers_stay_strings() {
        let a = parse(&["--run", "12345"]).unwrap();
        assert_eq!(a["run"], json!("12345"));
    }

    #[test]
    fn kebab_and_snake_spellings_both_work() {
        assert_eq!(parse(&["--max_lines", "5"]).unwrap()["max_lines"], json!(5));
        assert_eq!(parse(&["--max-lines=7"]).unwrap()["max_lines"], json!(7));
    }

    #[test]
    fn booleans_take_no_value_or_an_equals_value() {
        assert_eq!(
            parse(&["--print_metadata"]).unwrap()["print_metadata"],
            json!(true)
        );
        assert_eq!(
            parse(&["--print_metadata=False"]).unwrap()["print_metadata"],
            json!(false)
        );
        // A bare boolean does not swallow the positional that follows it.
        let a = parse(&["--print_metadata", "/some/path"]).unwrap();
        assert_eq!(a["path"], json!("/some/path"));
    }

    #[test]
    fn bad_numbers_name_the_flag() {
        let e = parse(&["--max_lines", "lots"]).unwrap_err();
        assert!(e.contains("--max_lines"), "{e}");
    }

    #[test]
    fn unknown_flags_are_rejected() {
        assert!(parse(&["--bogus", "1"]).is_err());
    }

    #[test]
    fn globals_are_extracted_anywhere() {
        let (g, rest) = extract_globals(
            [
                "tool",
                "--format",
                "table",
                "p",
                "--plugin-dir=/x",
                "--no_cache",
                "--run",
                "r",
            ]
            .map(String::from)
            .to_vec(),
        )
        .unwrap();
        assert_eq!(g.format.as_deref(), Some("table"));
        assert_eq!(g.plugin_dirs, vec![std::path::PathBuf::from("/x")]);
        assert!(g.no_cache);
        assert_eq!(rest, vec!["tool", "p", "--run", "r"]);
    }

    #[test]
    fn bad_format_is_rejected() {
        assert!(extract_globals(vec!["--format".into(), "xml".into()]).is_err());
    }
}
