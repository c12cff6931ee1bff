# SPDX-License-Identifier: Apache-2.0
# Writes OUT, a C file defining api_openapi() that returns the text of IN.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}" "/* Generated from api/openapi.json by api/embed.cmake. */\n"
     "#include \"api/api.h\"\n"
     "static const char text[] = {${bytes} 0};\n"
     "const char *api_openapi(void) { return text; }\n")
