#pragma once
#include <http_parser.h>
