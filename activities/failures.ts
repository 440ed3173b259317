/**
 * ApplicationFailure type of a write refused because a newer attempt claimed a higher fencing
 * token: the attempt's result is dropped and it fails without retry (the newer owner's stands).
 */
export const FENCED_OUT = 'FencedOut';
