//! Issue 33 item 7, people at a terminal: shell completions, `--compact`, tables as wide as the
//! terminal.

use xprof_tests::{Run, Sandbox};

fn tool_names(sb: &Sandbox) -> Vec<String> {
    let v = sb.run(&["tools", "--format", "json"]).json();
    v["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["tools"].as_array().unwrap().iter())
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn completions_for_bash_zsh_and_fish_name_every_tool_and_bash_parses_them() {
    let sb = Sandbox::new();
    let tools = tool_names(&sb);
    assert!(tools.len() > 40, "{}", tools.len());
    for (shell, full_flag) in [("bash", "--full"), ("zsh", "--full"), ("fish", "-l full")] {
        let r = sb.run(&["completions", shell]);
        assert_eq!(r.code, 0, "{shell}: {}", r.stderr);
        for t in &tools {
            assert!(r.stdout.contains(t.as_str()), "{shell}: no {t}");
        }
        assert!(r.stdout.contains(full_flag), "{shell}: no host flags");
    }
    let bash = sb.run(&["completions", "bash"]);
    let script = sb.path().join("xprof.bash");
    std::fs::write(&script, &bash.stdout).unwrap();
    let syntax = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        syntax.status.success(),
        "{}",
        String::from_utf8_lossy(&syntax.stderr)
    );
}

#[test]
fn completions_for_an_unknown_shell_are_a_usage_error_naming_the_shells() {
    let sb = Sandbox::new();
    let r = sb.run(&["completions", "tcsh"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let e = r.error();
    assert!(
        e["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("bash|zsh|fish"),
        "{e}"
    );
}

#[test]
fn compact_is_one_line_of_the_same_json() {
    let sb = Sandbox::new();
    let run = xprof_tests::fixtures().join("jax-cpu/logdir");
    let run = run.to_str().unwrap();
    let compact = sb.run(&["--no_cache", "get_hosts", run, "--compact"]);
    let pretty = sb.run(&["--no_cache", "get_hosts", run]);
    assert_eq!(compact.code, 0, "{}", compact.stderr);
    assert_eq!(compact.stdout.trim_end().lines().count(), 1);
    assert!(pretty.stdout.lines().count() > 1);
    assert_eq!(compact.json(), pretty.json());
}

#[test]
fn a_table_is_as_wide_as_columns_says_when_piped() {
    let sb = Sandbox::new();
    let run = xprof_tests::fixtures().join("jax-cpu/logdir/plugins/profile/two_process");
    let r: Run = sb
        .cmd()
        .args(["--no_cache", "get_hosts"])
        .arg(&run)
        .args(["--format", "table"])
        .env("COLUMNS", "60")
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let widest = r.stdout.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= 60, "{widest} columns:\n{}", r.stdout);
    assert!(r.stdout.contains("host1"), "{}", r.stdout);
}
