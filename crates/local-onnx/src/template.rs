//! The chat template: the model's own Jinja template, rendered with `minijinja`.
//!
//! Hugging Face renders `chat_template` with Jinja2 in a sandbox with `trim_blocks` and
//! `lstrip_blocks` on, Python string methods available (`.strip()`, `.startswith()`), and a
//! `raise_exception(msg)` function; this module does the same so templates written for
//! `transformers` (SmolLM2's, Llama 3's) render identically. A folder without a template gets
//! ChatML, which is what most small instruct models were trained on.

use minijinja::{Environment, ErrorKind as JinjaErrorKind, context};
use ripcord_core::{Error, Message, Role};
use serde::Serialize;

use crate::error::{invalid_request, unavailable};

/// ChatML, used when the model folder has no template.
pub(crate) const CHATML: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

const NAME: &str = "chat";

/// A compiled chat template.
pub(crate) struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
    fallback: bool,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("fallback_chatml", &self.fallback)
            .finish_non_exhaustive()
    }
}

#[derive(Serialize)]
struct TemplateMessage<'a> {
    role: &'a str,
    content: String,
}

impl ChatTemplate {
    /// Compiles `source` (or ChatML when `None`); `origin` names the file in errors.
    pub(crate) fn new(
        source: Option<String>,
        bos: Option<String>,
        eos: Option<String>,
        origin: &str,
    ) -> Result<ChatTemplate, Error> {
        let fallback = source.is_none();
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<String, minijinja::Error> {
                Err(minijinja::Error::new(JinjaErrorKind::InvalidOperation, msg))
            },
        );
        env.add_template_owned(NAME, source.unwrap_or_else(|| CHATML.to_owned()))
            .map_err(|e| {
                unavailable(format!(
                    "the chat template in {origin} does not compile: {e}"
                ))
            })?;
        Ok(ChatTemplate {
            env,
            bos: bos.unwrap_or_default(),
            eos: eos.unwrap_or_default(),
            fallback,
        })
    }

    /// True when the folder had no template and ChatML is used.
    pub(crate) fn is_fallback(&self) -> bool {
        self.fallback
    }

    /// The prompt for `messages`, ending with the assistant's turn opened.
    pub(crate) fn render(&self, messages: &[Message]) -> Result<String, Error> {
        let msgs: Vec<TemplateMessage<'_>> = messages
            .iter()
            .map(|m| TemplateMessage {
                role: match m.role {
                    Role::System => "system",
                    Role::User => "user",
                    Role::Assistant => "assistant",
                    _ => "tool",
                },
                content: m.text(),
            })
            .collect();
        let tmpl = self
            .env
            .get_template(NAME)
            .map_err(|e| invalid_request(format!("chat template: {e}")))?;
        tmpl.render(context! {
            messages => msgs,
            add_generation_prompt => true,
            bos_token => &self.bos,
            eos_token => &self.eos,
        })
        .map_err(|e| {
            invalid_request(format!(
                "the model's chat template refused the conversation: {e}"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-135M-Instruct's template, as its GGUF and tokenizer_config.json carry it.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn smollm2_template_adds_its_default_system_prompt() {
        let t = ChatTemplate::new(Some(SMOLLM2.into()), None, None, "test").unwrap();
        let out = t
            .render(&[Message::user("What is the capital of France?")])
            .unwrap();
        assert_eq!(
            out,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
             <|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
        );
        let out = t
            .render(&[Message::system("Be brief."), Message::user("Hi")])
            .unwrap();
        assert!(out.starts_with("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi"));
    }

    #[test]
    fn fallback_is_chatml() {
        let t = ChatTemplate::new(None, None, None, "test").unwrap();
        assert!(t.is_fallback());
        let out = t
            .render(&[
                Message::user("a"),
                Message::assistant("b"),
                Message::user("c"),
            ])
            .unwrap();
        assert_eq!(
            out,
            "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn llama3_template_with_bos_and_trim() {
        // Meta-Llama-3-8B-Instruct's template, verbatim.
        let src = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
        let t = ChatTemplate::new(
            Some(src.into()),
            Some("<|begin_of_text|>".into()),
            None,
            "test",
        )
        .unwrap();
        let out = t
            .render(&[Message::system("Be brief."), Message::user("  hi  ")])
            .unwrap();
        assert_eq!(
            out,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>\
             <|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        );
    }

    #[test]
    fn block_tags_on_their_own_lines_leave_no_whitespace_as_in_transformers() {
        // transformers renders with trim_blocks and lstrip_blocks.
        let src = "{% for m in messages %}\n  {% if m['role'] == 'user' %}\nU:{{ m['content'] }}\n  {% endif %}\n{% endfor %}";
        let t = ChatTemplate::new(Some(src.into()), None, None, "test").unwrap();
        assert_eq!(
            t.render(&[Message::user("hi"), Message::assistant("x")])
                .unwrap(),
            "U:hi\n"
        );
    }

    #[test]
    fn python_string_methods_and_raise_exception() {
        let src = "{% for m in messages %}{% if m['role'] == 'assistant' and loop.first %}{{ raise_exception('Conversation must start with the user') }}{% endif %}{{ m['content'].strip().upper() }}{% endfor %}";
        let t = ChatTemplate::new(Some(src.into()), None, None, "test").unwrap();
        assert_eq!(t.render(&[Message::user(" x ")]).unwrap(), "X");
        let e = t.render(&[Message::assistant("y")]).unwrap_err();
        assert_eq!(e.kind(), ripcord_core::ErrorKind::InvalidRequest);
        assert!(
            e.message()
                .contains("Conversation must start with the user"),
            "{e}"
        );
    }

    #[test]
    fn a_broken_template_is_a_load_error_naming_the_file() {
        let e = ChatTemplate::new(
            Some("{% for %}".into()),
            None,
            None,
            "/m/tokenizer_config.json",
        )
        .unwrap_err();
        assert_eq!(e.kind(), ripcord_core::ErrorKind::ModelNotFound);
        assert!(
            e.message().starts_with(
                "local model unavailable: the chat template in /m/tokenizer_config.json"
            ),
            "{e}"
        );
    }
}
