//! Issue 33 item 5: `xprof skills install` writes a skill that names exactly this build's
//! tools, where each client reads it.

use std::collections::BTreeSet;

use xprof_tests::Sandbox;

fn names(sb: &Sandbox) -> BTreeSet<String> {
    let v = sb.run(&["tools", "--format", "json"]).json();
    let mut out: BTreeSet<String> = v["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["tools"].as_array().unwrap().iter())
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    for host in ["tools", "plugins", "mcp", "cache", "completions", "skills"] {
        out.insert(host.into());
    }
    out
}

/// Every `xprof <word>` of a text, the word being what follows `xprof `.
fn commands(text: &str) -> BTreeSet<String> {
    text.match_indices("xprof ")
        .filter_map(|(i, _)| {
            let rest = &text[i + 6..];
            let word: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            (!word.is_empty() && word.chars().next().unwrap().is_ascii_lowercase()).then_some(word)
        })
        .collect()
}

#[test]
fn the_skill_names_only_tools_this_build_has_and_every_one_of_them() {
    let sb = Sandbox::new();
    let dir = sb.path().join("skills");
    let r = sb.run(&["skills", "install", "--dir", dir.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["status"], "written");
    let skill = std::fs::read_to_string(dir.join("xprof/SKILL.md")).unwrap();
    let tools = std::fs::read_to_string(dir.join("xprof/references/tools.md")).unwrap();
    assert!(
        skill.starts_with("---\nname: xprof\ndescription:"),
        "{}",
        &skill[..80]
    );
    let known = names(&sb);
    // "xprof CLI", "xprof answers" ...: prose words that are not commands.
    let prose = ["answers", "CLI"];
    for cmd in commands(&skill).union(&commands(&tools)) {
        assert!(
            known.contains(cmd) || prose.contains(&cmd.as_str()),
            "the skill names `xprof {cmd}`, which this build does not have"
        );
    }
    for tool in known.iter().filter(|t| {
        !["tools", "plugins", "cache", "completions", "skills", "mcp"].contains(&t.as_str())
    }) {
        assert!(
            skill.contains(&format!("`xprof {tool}`")),
            "SKILL.md lacks {tool}"
        );
        assert!(
            tools.contains(&format!("\n## {tool}\n")),
            "tools.md lacks {tool}"
        );
    }
    assert!(skill.contains("xprof diagnose PATH"));
}

#[test]
fn each_client_gets_the_skill_where_it_reads_it() {
    let sb = Sandbox::new();
    let home = sb.path().join("home");
    for (client, file) in [
        ("claude", home.join(".claude/skills/xprof/SKILL.md")),
        ("codex", home.join(".codex/skills/xprof/SKILL.md")),
        (
            "gemini",
            home.join(".gemini/extensions/xprof/gemini-extension.json"),
        ),
        ("cursor", sb.path().join(".cursor/rules/xprof.mdc")),
    ] {
        let r = sb.run(&["skills", "install", "--client", client]);
        assert_eq!(r.code, 0, "{client}: {}", r.stderr);
        assert!(file.is_file(), "{client}: no {}", file.display());
    }
    let ext: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(home.join(".gemini/extensions/xprof/gemini-extension.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(ext["contextFileName"], "SKILL.md");
    assert_eq!(ext["mcpServers"]["xprof"]["args"][0], "mcp");
}

#[test]
fn skills_install_without_a_place_or_with_an_unknown_client_is_a_usage_error() {
    let sb = Sandbox::new();
    for args in [
        &["skills", "install"][..],
        &["skills", "install", "--client", "emacs"],
        &["skills", "remove"],
    ] {
        let r = sb.run(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.error()["error"]["hint"]
                .as_str()
                .unwrap()
                .contains("--client")
        );
    }
}

#[test]
fn mcp_install_merges_into_a_json_config_and_keeps_the_other_servers() {
    let sb = Sandbox::new();
    let cfg = sb.path().join("home/.cursor/mcp.json");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(
        &cfg,
        r#"{"mcpServers": {"other": {"command": "other"}}, "theme": "dark"}"#,
    )
    .unwrap();
    let r = sb.run(&[
        "mcp", "install", "--client", "cursor", "--", "--root", "/data/p",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["status"], "written");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    assert_eq!(v["theme"], "dark");
    assert_eq!(v["mcpServers"]["other"]["command"], "other");
    let xprof = &v["mcpServers"]["xprof"];
    assert!(
        std::path::Path::new(xprof["command"].as_str().unwrap()).is_absolute(),
        "{xprof}"
    );
    assert_eq!(
        xprof["args"],
        serde_json::json!(["mcp", "--root", "/data/p"])
    );
    // Claude Code keeps its own state: the command to run is printed.
    let claude = sb.run(&["mcp", "install", "--client", "claude"]).json();
    assert!(
        claude["command"]
            .as_str()
            .unwrap()
            .starts_with("claude mcp add --scope user xprof -- /"),
        "{claude}"
    );
    // --print writes nothing.
    let vscode = sb.run(&["mcp", "install", "--client", "vscode", "--print"]);
    assert_eq!(vscode.json()["status"], "paste_this");
    assert!(!sb.path().join(".vscode").exists());
}

#[test]
fn mcp_install_refuses_a_config_that_is_not_json_and_leaves_it_alone() {
    let sb = Sandbox::new();
    let cfg = sb.path().join("home/.gemini/settings.json");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(&cfg, "{ not json").unwrap();
    let r = sb.run(&["mcp", "install", "--client", "gemini"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.error()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not JSON")
    );
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), "{ not json");
}
