// stream.cpp - parse a streamed model output with libchatparse from C++17.
//
//   stream TABLES.cpt OUTPUT [--prompt FILE] [--tools FILE] [--chunk N] [--vllm]
//   stream TABLES.cpt OUTPUT --ids [--prompt FILE | --prompt-ids FILE] [--tools FILE] [--chunk N] [--vllm]
//
// Loads a compiled response template (a `.cpt` file, e.g. from `chatparse compile DIR`), feeds the output
// (a file, or - for standard input) N bytes at a time (3 by default, so multi-byte UTF-8 characters are
// split across feeds on purpose), and prints each feed's events, the final events and the message:
//
//   initial: [...]
//   feed 1 (3 bytes): [...]
//   ...
//   final: [...]
//   message: {"role":"assistant",...}
//
// With --ids, OUTPUT (and --prompt-ids) hold token ids (integers separated by spaces or commas, a JSON list
// will do), fed N ids at a time to a parser over the tables' token section (Python's TokenParser).
//
// Events and the message are JSON text, exactly as Python's chatparse gives them (json.dumps, compact).
// Any error (unreadable file, refused tables, a parse error) is printed as `error: <Python class>: <message>`
// on standard error, and the exit status is 1 (2 for a usage error).
//
// The C handles live in small RAII wrappers (namespace chatparse below): no manual frees, and a failing
// call throws chatparse::Error carrying the library's exception class and message.

#include "chatparse.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chatparse {

// A failed library call: `exception` is the Python exception class chatparse raises for the same condition.
class Error : public std::runtime_error {
public:
    Error(std::string exception, const std::string &message)
        : std::runtime_error(message), exception_(std::move(exception)) {}
    explicit Error(const cp_error &err) : Error(err.exception, err.message) {}
    const std::string &exception() const noexcept { return exception_; }

private:
    std::string exception_;
};

namespace detail {
struct Free {
    void operator()(void *p) const noexcept { cp_free(p); }
};
struct FreeTables {
    void operator()(cp_tables *t) const noexcept { cp_tables_free(t); }
};
struct FreeParser {
    void operator()(cp_parser *p) const noexcept { cp_parser_free(p); }
};

// Take ownership of a string the library returned (freed with cp_free), or throw its error.
inline std::string take(char *text, size_t len, const cp_error &err) {
    std::unique_ptr<char, Free> owned(text);
    if (!owned) throw Error(err);
    return std::string(owned.get(), len);
}
}  // namespace detail

// Loaded tables: read-only, shareable between threads and parsers. Copies share one cp_tables, which is freed
// with the last copy (a parser holds one, so the tables always outlive their parsers).
class Tables {
public:
    static Tables load(std::string_view bytes) {
        cp_error err{};
        cp_tables *t = cp_tables_load(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(), &err);
        if (!t) throw Error(err);
        return Tables(t);
    }
    const cp_tables *get() const noexcept { return tables_.get(); }

private:
    explicit Tables(cp_tables *t) : tables_(t, detail::FreeTables{}) {}
    std::shared_ptr<cp_tables> tables_;
};

// The events and the message the end of the stream gives.
struct Finish {
    std::string events;   // JSON list
    std::string message;  // JSON object
};

// One streaming parse (Python's ResponseParser). Move-only; one thread at a time.
class Parser {
public:
    // `tools_json` is the request's tools as JSON text (a list), or empty for none.
    Parser(Tables tables, std::string_view prompt, std::string_view tools_json = {},
           cp_dialect dialect = CP_DIALECT_TRANSFORMERS_EVENTS)
        : tables_(std::move(tables)) {
        cp_parser_options opts{};
        opts.dialect = dialect;
        opts.tools_json = tools_json.empty() ? nullptr : tools_json.data();
        opts.tools_json_len = tools_json.size();
        cp_error err{};
        // (an empty string_view may have a NULL data(): pass "" so an empty prompt is not a missing one)
        parser_.reset(cp_parser_new(tables_.get(), prompt.data() ? prompt.data() : "", prompt.size(), &opts, &err));
        if (!parser_) throw Error(err);
    }

    // A parser fed token ids (Python's TokenParser), over tables with a token section; the prompt is text.
    static Parser for_ids(Tables tables, std::string_view prompt, std::string_view tools_json = {},
                          cp_dialect dialect = CP_DIALECT_TRANSFORMERS_EVENTS) {
        return Parser(std::move(tables), &prompt, nullptr, tools_json, dialect);
    }
    // The same, with the prompt as token ids.
    static Parser for_ids(Tables tables, const std::vector<int64_t> &prompt_ids, std::string_view tools_json = {},
                          cp_dialect dialect = CP_DIALECT_TRANSFORMERS_EVENTS) {
        return Parser(std::move(tables), nullptr, &prompt_ids, tools_json, dialect);
    }

    // The events of the prompt (JSON list).
    std::string initial_events() {
        size_t len = 0;
        const char *events = cp_parser_initial_events(parser_.get(), &len);
        return std::string(events, len);
    }

    // Feed bytes of UTF-8 output (a character may be split across feeds); returns this feed's events.
    std::string feed(std::string_view bytes) {
        cp_error err{};
        size_t len = 0;
        char *events = cp_parser_feed(parser_.get(), bytes.data(), bytes.size(), &len, &err);
        return detail::take(events, len, err);
    }

    // Feed token ids (a parser from for_ids); returns the events of the text they complete.
    std::string feed_ids(const std::vector<int64_t> &ids) {
        cp_error err{};
        size_t len = 0;
        char *events = cp_parser_feed_ids(parser_.get(), ids.data(), ids.size(), &len, &err);
        return detail::take(events, len, err);
    }

    // The end of the stream: the final events and the message.
    Finish finalize() {
        cp_error err{};
        char *message = nullptr;
        size_t message_len = 0, len = 0;
        char *events = cp_parser_finalize(parser_.get(), &message, &message_len, &len, &err);
        std::unique_ptr<char, detail::Free> owned_message(message);
        Finish out;
        out.events = detail::take(events, len, err);
        out.message.assign(owned_message.get(), message_len);
        return out;
    }

private:
    Parser(Tables tables, const std::string_view *prompt, const std::vector<int64_t> *prompt_ids,
           std::string_view tools_json, cp_dialect dialect)
        : tables_(std::move(tables)) {
        static const int64_t no_ids = 0;  // an empty id list is a non-NULL pointer with n = 0 (NULL: no prompt)
        cp_parser_options opts{};
        opts.dialect = dialect;
        opts.tools_json = tools_json.empty() ? nullptr : tools_json.data();
        opts.tools_json_len = tools_json.size();
        cp_error err{};
        parser_.reset(cp_parser_new_ids(
            tables_.get(), prompt ? (prompt->data() ? prompt->data() : "") : nullptr, prompt ? prompt->size() : 0,
            prompt_ids ? (prompt_ids->empty() ? &no_ids : prompt_ids->data()) : nullptr,
            prompt_ids ? prompt_ids->size() : 0, &opts, &err));
        if (!parser_) throw Error(err);
    }

    Tables tables_;  // declared first: destroyed after the parser
    std::unique_ptr<cp_parser, detail::FreeParser> parser_;
};

}  // namespace chatparse

namespace {

std::string read_file(const std::string &path) {
    if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
    std::ifstream in(path, std::ios::binary);
    if (!in) throw chatparse::Error("OSError", "cannot read " + path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// Token ids: integers separated by spaces, commas or newlines (a JSON list of them will do).
std::vector<int64_t> parse_ids(const std::string &text, const std::string &path) {
    std::vector<int64_t> ids;
    const char *p = text.c_str();
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\n' || *p == '\r' || *p == '\t' || *p == '[' || *p == ']') ++p;
        if (*p == '\0') return ids;
        char *end = nullptr;
        errno = 0;
        long long id = std::strtoll(p, &end, 10);
        if (end == p || errno != 0) throw chatparse::Error("ValueError", path + ": not a list of token ids");
        ids.push_back(static_cast<int64_t>(id));
        p = end;
    }
}

int usage(const char *why) {
    std::cerr << "error: " << why << "\n"
              << "usage: stream TABLES.cpt OUTPUT [--prompt FILE] [--tools FILE] [--chunk N] [--vllm]\n"
                 "       stream TABLES.cpt OUTPUT --ids [--prompt FILE | --prompt-ids FILE] [--tools FILE] [--chunk N]"
                 " [--vllm]\n"
                 "  OUTPUT is a file of the model's output (- for standard input), fed N bytes at a time (3);\n"
                 "  with --ids, a file of token ids, fed N ids at a time\n";
    return 2;
}

// The end of the stream: print the final events and the message.
int finish(chatparse::Parser &parser) {
    chatparse::Finish end = parser.finalize();
    std::cout << "final: " << end.events << "\n";
    std::cout << "message: " << end.message << std::endl;
    return std::cout ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
    std::string tables_path, output_path, prompt_path, prompt_ids_path, tools_path;
    bool ids_mode = false;
    size_t chunk = 3;
    cp_dialect dialect = CP_DIALECT_TRANSFORMERS_EVENTS;
    int positional = 0;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        bool has_value = i + 1 < argc;
        if (arg == "--prompt" && has_value) {
            prompt_path = argv[++i];
        } else if (arg == "--prompt-ids" && has_value) {
            prompt_ids_path = argv[++i];
        } else if (arg == "--ids") {
            ids_mode = true;
        } else if (arg == "--tools" && has_value) {
            tools_path = argv[++i];
        } else if (arg == "--chunk" && has_value) {
            char *end = nullptr;
            long n = std::strtol(argv[++i], &end, 10);
            if (*end != '\0' || n < 1) return usage("--chunk takes a positive number of bytes");
            chunk = static_cast<size_t>(n);
        } else if (arg == "--vllm") {
            dialect = CP_DIALECT_VLLM_EVENTS;
        } else if (arg.size() > 1 && arg[0] == '-') {
            return usage(("unknown option " + std::string(arg)).c_str());
        } else if (positional == 0) {
            tables_path = arg, ++positional;
        } else if (positional == 1) {
            output_path = arg, ++positional;
        } else {
            return usage("too many arguments");
        }
    }
    if (positional != 2) return usage("TABLES.cpt and OUTPUT are required");
    if (!prompt_ids_path.empty() && (!ids_mode || !prompt_path.empty()))
        return usage("--prompt-ids goes with --ids, instead of --prompt");

    try {
        // A prompt is what the model continued; "" opts out of cutting at the template's start anchor.
        std::string prompt = prompt_path.empty() ? std::string() : read_file(prompt_path);
        std::string tools = tools_path.empty() ? std::string() : read_file(tools_path);
        std::string output = read_file(output_path);

        chatparse::Tables tables = chatparse::Tables::load(read_file(tables_path));
        if (!ids_mode) {
            chatparse::Parser parser(tables, prompt, tools, dialect);
            std::cout << "initial: " << parser.initial_events() << "\n";
            size_t n = 0;
            for (size_t at = 0; at < output.size(); at += chunk) {
                std::string_view piece = std::string_view(output).substr(at, chunk);
                std::cout << "feed " << ++n << " (" << piece.size() << " bytes): " << parser.feed(piece) << "\n";
            }
            return finish(parser);
        }
        std::vector<int64_t> ids = parse_ids(output, output_path);
        chatparse::Parser parser =
            prompt_ids_path.empty()
                ? chatparse::Parser::for_ids(tables, prompt, tools, dialect)
                : chatparse::Parser::for_ids(tables, parse_ids(read_file(prompt_ids_path), prompt_ids_path), tools,
                                             dialect);
        std::cout << "initial: " << parser.initial_events() << "\n";
        size_t n = 0;
        for (size_t at = 0; at < ids.size(); at += chunk) {
            std::vector<int64_t> piece(ids.begin() + at, ids.begin() + std::min(ids.size(), at + chunk));
            std::cout << "feed " << ++n << " (" << piece.size() << " ids): " << parser.feed_ids(piece) << "\n";
        }
        return finish(parser);
    } catch (const chatparse::Error &e) {
        std::cout.flush();
        std::cerr << "error: " << e.exception() << ": " << e.what() << "\n";
        return 1;
    } catch (const std::exception &e) {
        std::cout.flush();
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
}
