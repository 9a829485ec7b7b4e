//! `dsh config dump | schema`.

use std::io::Write;

use crate::compose::{compose, registry};
use crate::{ComposeArgs, Failure};

/// Prints the composed tree as YAML, each row annotated with the layer it came from.
pub(crate) fn dump(args: &ComposeArgs) -> Result<u8, Failure> {
    let registry = registry();
    let composition = compose(args, None, &registry)?;
    print_composition(&composition)
}

/// Prints a composed tree as YAML, each row annotated with the layer it came from.
pub(crate) fn print_composition(composition: &dsh_kernel::Composition) -> Result<u8, Failure> {
    let mut out = String::from("plugins:\n");
    for r in &composition.rows {
        out.push_str(&format!("  # from {}\n", r.source));
        let row = serde_json::to_value(&r.row).map_err(|e| Failure::run(anyhow::anyhow!(e)))?;
        let yaml =
            yaml_serde::to_string(&vec![row]).map_err(|e| Failure::run(anyhow::anyhow!(e)))?;
        for line in yaml.lines() {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    }
    write_stdout(&out)
}

/// Prints `{plugin: schema}` for every registered plugin.
pub(crate) fn schema() -> Result<u8, Failure> {
    let registry = registry();
    let mut all = serde_json::Map::new();
    for name in registry.names() {
        let schema = registry.schema(&name).map_err(Failure::run)?;
        all.insert(name, schema);
    }
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(all))
        .map_err(|e| Failure::run(anyhow::anyhow!(e)))?;
    write_stdout(&format!("{text}\n"))
}

pub(crate) fn write_stdout(text: &str) -> Result<u8, Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(0),
        // A closed pipe (`| head`) is not an error worth a message.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(Failure::run(anyhow::anyhow!("cannot write to stdout: {e}"))),
    }
}
