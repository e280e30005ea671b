# Every dependency is a Debian package; versions it was tested with are in README.md.
find_package(Threads REQUIRED)
find_package(OpenSSL 3 REQUIRED)            # libssl-dev: SHA-256
find_package(nlohmann_json 3.11 REQUIRED)   # nlohmann-json3-dev
find_package(fmt 9 REQUIRED)                # libfmt-dev
find_package(CLI11 2 REQUIRED)              # libcli11-dev
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)   # libpcre2-dev
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc) # libutf8proc-dev
if(FAK_BUILD_TESTS)
  find_package(GTest REQUIRED)              # libgtest-dev
endif()
