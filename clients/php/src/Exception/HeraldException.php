<?php

declare(strict_types=1);

namespace Herald\Exception;

/** Every exception this package throws (the database's own errors pass through as they are). */
class HeraldException extends \RuntimeException
{
}
