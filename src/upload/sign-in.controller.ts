import { Controller, Get, Header, HttpStatus, Post, Redirect, Req } from '@nestjs/common';
import type { CookieOptions, Request } from 'express';
import { ApiError } from '../common/api-error';
import { SetsCookies, WithCookies } from '../common/cookies.interceptor';
import { RawData } from '../common/negotiation.guard';
import { publicBaseUrl } from '../common/public-uri';
import { NodeConfig } from '../config/config-slices';
import { Access } from '../security/access.decorator';
import {
  RequestAccessService,
  SESSION_COOKIE,
  sessionCookieOf,
} from '../security/request-access.service';
import { SignInService } from './sign-in.service';

/** Carries the sign-in under way, sealed (sign-in-state.ts); only the callback reads it. */
const SIGN_IN_COOKIE = 'svc_sign_in';
const SIGN_IN_PATH = '/svc/sign-in';

/** A redirect (@Redirect takes url and statusCode) with the cookies it sets or clears. */
interface SignInRedirect extends WithCookies {
  url: string;
  statusCode: HttpStatus;
}

/** What the page reads from GET /svc/session. */
interface PageSession {
  signInAvailable: boolean;
  principal: string | null;
  roles: readonly string[];
}

function signInCookieOf(req: Request): string | null {
  const header = req.headers.cookie ?? '';
  const match = new RegExp(`(?:^|;\\s*)${SIGN_IN_COOKIE}=([\\w-]{20,1000})(?:;|$)`).exec(header);
  return match ? match[1] : null;
}

/**
 * The upload page's sign-in with the identity provider (docs/security.md): start, the
 * provider's redirect back, sign-out, and who is signed in. Public routes: they are how one
 * signs in; sign-out and the session's principal concern only the caller's own cookie.
 */
@Controller('svc')
@Access('public')
@SetsCookies()
export class SignInController {
  constructor(
    private readonly signIn: SignInService,
    private readonly access: RequestAccessService,
    private readonly config: NodeConfig,
  ) {}

  @Get('sign-in')
  @RawData()
  @Redirect()
  async start(@Req() req: Request): Promise<SignInRedirect> {
    this.requireEnabled();
    const { signInState, location } = await this.signIn.start(this.callbackUrl(req));
    return {
      url: location,
      statusCode: HttpStatus.SEE_OTHER,
      cookies: [
        {
          name: SIGN_IN_COOKIE,
          value: signInState,
          options: this.cookieOptions(req, SIGN_IN_PATH, 600_000),
        },
      ],
    };
  }

  @Get('sign-in/callback')
  @RawData()
  @Redirect()
  async callback(@Req() req: Request): Promise<SignInRedirect> {
    this.requireEnabled();
    const currentUrl = new URL(req.originalUrl, publicBaseUrl(req, this.config.publicBaseUrl));
    const { sessionId } = await this.signIn.finish(signInCookieOf(req), currentUrl);
    return {
      url: '/svc/',
      statusCode: HttpStatus.SEE_OTHER,
      cookies: [
        { name: SIGN_IN_COOKIE, value: null, options: this.cookieOptions(req, SIGN_IN_PATH) },
        {
          name: SESSION_COOKIE,
          value: sessionId,
          options: this.cookieOptions(req, '/svc', this.signIn.sessionLifetimeMs),
        },
      ],
    };
  }

  @Post('sign-out')
  @RawData()
  @Redirect()
  async signOut(@Req() req: Request): Promise<SignInRedirect> {
    // Another site's form cannot sign the user out: the access guard refuses it (refuseCrossSite).
    await this.signIn.signOut(sessionCookieOf(req));
    return {
      url: '/svc/',
      statusCode: HttpStatus.SEE_OTHER,
      cookies: [{ name: SESSION_COOKIE, value: null, options: this.cookieOptions(req, '/svc') }],
    };
  }

  /** Who the page is signed in as (JSON), and whether it can sign in at all. */
  @Get('session')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async session(@Req() req: Request): Promise<PageSession> {
    const principal =
      this.signIn.enabled && sessionCookieOf(req) !== null
        ? await this.access.principalOf(req).catch(() => null)
        : null;
    return {
      signInAvailable: this.signIn.enabled,
      principal: principal?.source === 'oidc' ? principal.name : null,
      roles: principal?.source === 'oidc' ? principal.roles : [],
    };
  }

  private requireEnabled(): void {
    if (!this.signIn.enabled) {
      throw new ApiError(
        HttpStatus.NOT_FOUND,
        'Signing in is not configured: AUTH_MODE must include oidc and OIDC_CLIENT_ID be set.',
      );
    }
  }

  private callbackUrl(req: Request): string {
    return `${publicBaseUrl(req, this.config.publicBaseUrl)}${SIGN_IN_PATH}/callback`;
  }

  /** HttpOnly, SameSite=Lax (sent on the provider's redirect back, not on cross-site posts), Secure behind https. */
  private cookieOptions(req: Request, path: string, maxAge?: number): CookieOptions {
    return {
      httpOnly: true,
      sameSite: 'lax',
      secure: publicBaseUrl(req, this.config.publicBaseUrl).startsWith('https:'),
      path,
      ...(maxAge === undefined ? {} : { maxAge }),
    };
  }
}
