#pragma once
#include <uv.h>
