// A tiny stand-in for testlib.h (Mike Mirzayanov's checker library), written for CodeFu's tests: just enough
// of its API shape (registerTestlibCmd, the inf/ouf/ans streams, quitf/quitp and the _ok/_wa/_pe/_fail
// verdicts with testlib's default exit codes and stderr messages) to compile a checker written the testlib
// way. Not testlib itself: no strict mode, no validators, generators or interactors.
#ifndef CODEFU_MINI_TESTLIB_H
#define CODEFU_MINI_TESTLIB_H

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

enum TResult { _ok = 0, _wa = 1, _pe = 2, _fail = 3, _dirt = 4, _points = 5, _unexpected_eof = 8 };
enum TMode { _input, _output, _answer };

static int __mini_exit_code(TResult r) {
    switch (r) {
        case _ok: return 0;
        case _wa: return 1;
        case _pe: case _dirt: case _unexpected_eof: return 2;
        case _points: return 7;
        default: return 3;
    }
}

static std::string __mini_format(const char* fmt, va_list ap) {
    char buffer[4096];
    vsnprintf(buffer, sizeof buffer, fmt, ap);
    return buffer;
}

[[noreturn]] static void __mini_quit(TResult r, const std::string& message);

struct InStream {
    std::string data, name;
    size_t pos = 0;
    TMode mode = _input;

    void init(const char* path, TMode m) {
        name = path;
        mode = m;
        FILE* f = std::fopen(path, "rb");
        if (!f) __mini_quit(m == _output ? _pe : _fail, "cannot open " + name);
        char chunk[1 << 16];
        size_t n;
        while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) data.append(chunk, n);
        std::fclose(f);
    }

    // A problem in this stream: the contestant's fault for ouf, the checker's data for inf and ans.
    [[noreturn]] void quit(TResult r, const std::string& message) {
        __mini_quit(mode == _output || r == _fail ? r : _fail, message + " (" + name + ")");
    }

    [[noreturn]] void quitf(TResult r, const char* fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        std::string message = __mini_format(fmt, ap);
        va_end(ap);
        quit(r, message);
    }

    void skipBlanks() {
        while (pos < data.size() && std::isspace(static_cast<unsigned char>(data[pos]))) pos++;
    }
    bool seekEof() {
        skipBlanks();
        return pos >= data.size();
    }
    bool eof() { return pos >= data.size(); }

    std::string readToken() {
        skipBlanks();
        if (pos >= data.size()) quit(_unexpected_eof, "unexpected end of file - token expected");
        size_t start = pos;
        while (pos < data.size() && !std::isspace(static_cast<unsigned char>(data[pos]))) pos++;
        return data.substr(start, pos - start);
    }
    std::string readWord() { return readToken(); }

    std::string readLine() {
        if (pos >= data.size()) quit(_unexpected_eof, "unexpected end of file - line expected");
        size_t end = data.find('\n', pos);
        if (end == std::string::npos) end = data.size();
        std::string line = data.substr(pos, end - pos);
        pos = end < data.size() ? end + 1 : end;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return line;
    }

    long long readLong(long long lo = LLONG_MIN, long long hi = LLONG_MAX, const std::string& what = "") {
        std::string token = readToken();
        const char* s = token.c_str();
        char* end = nullptr;
        errno = 0;
        long long v = std::strtoll(s, &end, 10);
        bool digits = token.size() > (token[0] == '-' ? 1u : 0u);
        if (!digits || *end != '\0' || errno == ERANGE || token[0] == '+')
            quit(_pe, "expected an integer, found \"" + token + "\"");
        if (v < lo || v > hi)
            quit(_wa, (what.empty() ? std::string("integer ") : what + " = ") + token + " is out of range [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
        return v;
    }
    int readInt(int lo = INT_MIN, int hi = INT_MAX, const std::string& what = "") {
        return static_cast<int>(readLong(lo, hi, what));
    }
};

static InStream inf, ouf, ans;

[[noreturn]] static void __mini_quit(TResult r, const std::string& message) {
    if (r == _ok && !ouf.seekEof()) {
        r = _pe;
        std::fprintf(stderr, "wrong output format Extra information in the output file\n");
        std::exit(__mini_exit_code(r));
    }
    const char* prefix = r == _ok ? "ok " : r == _wa ? "wrong answer " : r == _fail ? "FAIL "
                       : r == _points ? "points " : "wrong output format ";
    std::fprintf(stderr, "%s%s\n", prefix, message.c_str());
    std::exit(__mini_exit_code(r));
}

[[noreturn]] static void quitf(TResult r, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string message = __mini_format(fmt, ap);
    va_end(ap);
    __mini_quit(r, message);
}

// testlib's quitp: exit code 7, stderr "points <value> <message>".
[[noreturn]] static void quitp(double points, const char* fmt = "", ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string message = __mini_format(fmt, ap);
    va_end(ap);
    char value[64];
    std::snprintf(value, sizeof value, "%.10g", points);
    __mini_quit(_points, message.empty() ? std::string(value) : std::string(value) + " " + message);
}

static void ensuref(bool condition, const char* fmt, ...) {
    if (condition) return;
    va_list ap;
    va_start(ap, fmt);
    std::string message = __mini_format(fmt, ap);
    va_end(ap);
    __mini_quit(_fail, message);
}

static void registerTestlibCmd(int argc, char* argv[]) {
    if (argc < 4) __mini_quit(_fail, "usage: checker <input> <output> <answer>");
    inf.init(argv[1], _input);
    ouf.init(argv[2], _output);
    ans.init(argv[3], _answer);
}

#endif
