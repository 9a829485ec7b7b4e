//! The original harness's provider and model names, mapped onto dsh's routes.

/// The provider the Python client sends by default.
pub const CLIENT_PROVIDER: &str = "deepseek-official";

/// The mounted route a client's provider name means: the name itself when mounted, else its
/// twin (`deepseek-official` ↔ `deepseek`, the DeepSeek route's ids before and after dsh
/// adopted the original's).
pub fn provider(name: &str, routes: &[String]) -> Option<String> {
    if routes.iter().any(|r| r == name) {
        return Some(name.to_owned());
    }
    let twin = match name {
        "deepseek-official" => "deepseek",
        "deepseek" => "deepseek-official",
        _ => return None,
    };
    routes.iter().find(|r| *r == twin).cloned()
}

/// The model id dsh serves for one of the original's model names, if it has another name.
pub fn model(name: &str) -> Option<&'static str> {
    match name {
        "deepseek-v4-flash" => Some("deepseek-flash"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_map_both_ways() {
        let dsh = vec!["deepseek".to_owned()];
        let official = vec!["deepseek-official".to_owned()];
        assert_eq!(
            provider("deepseek-official", &dsh).as_deref(),
            Some("deepseek")
        );
        assert_eq!(
            provider("deepseek", &official).as_deref(),
            Some("deepseek-official")
        );
        assert_eq!(provider("deepseek", &dsh).as_deref(), Some("deepseek"));
        assert_eq!(provider("openai", &dsh), None);
        assert_eq!(model("deepseek-v4-flash"), Some("deepseek-flash"));
        assert_eq!(model("deepseek-v4-pro"), None);
    }
}
