# SPDX-License-Identifier: Apache-2.0
# Writes OUT, a C file defining web_assets[] (web.h) from FILES (names of files of DIR,
# separated by commas): index.html is served at /, every other file at /ui/<name>. Each gets
# its media type from its extension and a strong ETag from its SHA-256, so that a browser
# revalidates with one request and gets 304 while the binary is the same.
string(REPLACE "," ";" FILES "${FILES}")
set(types_html "text/html; charset=utf-8")
set(types_js "text/javascript; charset=utf-8")
set(types_css "text/css; charset=utf-8")
set(types_svg "image/svg+xml")
set(arrays "")
set(rows "")
set(i 0)
foreach(name IN LISTS FILES)
  file(READ "${DIR}/${name}" hex HEX)
  file(SHA256 "${DIR}/${name}" sum)
  string(SUBSTRING "${sum}" 0 20 etag)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "^.*\\.([a-z]+)$" "\\1" ext "${name}")
  if(NOT DEFINED types_${ext})
    message(FATAL_ERROR "server/web/${name}: no media type for .${ext}; add one to embed.cmake")
  endif()
  if(name STREQUAL "index.html")
    set(url "/")
  else()
    set(url "/ui/${name}")
  endif()
  string(APPEND arrays "static const unsigned char f${i}[] = {${bytes}};\n")
  string(APPEND rows "    {\"${url}\", \"${types_${ext}}\", \"\\\"${etag}\\\"\", f${i}, sizeof(f${i})},\n")
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE "${OUT}" "/* Generated from server/web/ by server/web/embed.cmake. */\n"
     "#include \"web.h\"\n" "${arrays}"
     "const struct web_asset web_assets[] = {\n${rows}    {0, 0, 0, 0, 0},\n};\n")
