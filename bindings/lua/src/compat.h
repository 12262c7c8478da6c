/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compat.h - the few Lua C API differences between Lua 5.4 and the 5.1 API
 * (LuaJIT, PUC Lua 5.1) that the s3lect module needs.
 *
 * Only the 5.1 API is assumed on the 5.1 side (no LuaJIT 2.1 extensions such
 * as luaL_setfuncs or luaL_traceback), so the module also builds against
 * LuaJIT 2.0 and PUC Lua 5.1.
 */
#ifndef S3LECT_LUA_COMPAT_H
#define S3LECT_LUA_COMPAT_H

#include <stdint.h>

#include <lauxlib.h>
#include <lua.h>

#if LUA_VERSION_NUM >= 502

#define s3l_setfuncs(L, l) luaL_setfuncs((L), (l), 0)
#define s3l_rawlen(L, i) lua_rawlen((L), (i))
#define s3l_testudata(L, i, t) luaL_testudata((L), (i), (t))

/* Runs f(L) with one light userdata argument in protected mode. Returns the
 * lua_pcall status. Pushing a C function without upvalues and a light
 * userdata does not allocate, so nothing here can raise outside protection. */
static inline int s3l_cpcall(lua_State *L, lua_CFunction f, void *ud)
{
    if (!lua_checkstack(L, 2))
        return LUA_ERRMEM;
    lua_pushcfunction(L, f);
    lua_pushlightuserdata(L, ud);
    return lua_pcall(L, 1, 0, 0);
}

/* Traceback message handler body: msg is on top; replaces it with msg plus
 * a traceback. */
static inline void s3l_traceback(lua_State *L, const char *msg)
{
    luaL_traceback(L, L, msg, 1);
}

#else /* Lua 5.1 API (LuaJIT) */

#define s3l_setfuncs(L, l) luaL_register((L), NULL, (l))
#define s3l_rawlen(L, i) lua_objlen((L), (i))
#define s3l_cpcall(L, f, ud) lua_cpcall((L), (f), (ud))

static inline void *s3l_testudata(lua_State *L, int i, const char *tname)
{
    void *p = lua_touserdata(L, i);
    if (p == NULL || !lua_getmetatable(L, i))
        return NULL;
    luaL_getmetatable(L, tname);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same ? p : NULL;
}

#ifndef LUA_OK
#define LUA_OK 0
#endif

/* 5.1 has no luaL_traceback: use debug.traceback when the debug library is
 * loaded, else keep the bare message. */
static inline void s3l_traceback(lua_State *L, const char *msg)
{
    lua_getfield(L, LUA_GLOBALSINDEX, "debug");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "traceback");
        if (lua_isfunction(L, -1)) {
            lua_pushstring(L, msg);
            lua_pushinteger(L, 2);
            lua_call(L, 2, 1);
            lua_remove(L, -2); /* debug */
            return;
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    lua_pushstring(L, msg);
}

#endif

/* 64-bit integers: exact in 5.4; doubles (exact below 2^53) in the 5.1 API. */
static inline void s3l_pushint64(lua_State *L, int64_t v)
{
#if LUA_VERSION_NUM >= 503
    lua_pushinteger(L, (lua_Integer)v);
#else
    lua_pushnumber(L, (lua_Number)v);
#endif
}

#endif
